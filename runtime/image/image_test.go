package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// staticHelper builds testdata/hello as a static binary: a few-MB stand-in for kueuelab and the
// control-plane binaries, so the test builds real images in seconds.
func staticHelper(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hello")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/hello: %v\n%s", err, b)
	}
	return out
}

// entry is one file of an image as a container runtime would unpack it.
type entry struct {
	typ      byte
	mode     int64
	uid, gid int
	data     []byte
}

// archive reads an image archive the way `docker load` / `ctr import` do: manifest.json, the
// config, and every layer's files (later layers win).
type archive struct {
	repoTags []string
	config   *v1.ConfigFile
	digest   v1.Hash
	files    map[string]entry
	layers   int
}

func readArchive(t *testing.T, p string) *archive {
	t.Helper()
	mf, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(p) })
	if err != nil {
		t.Fatalf("%s: manifest.json: %v", p, err)
	}
	if len(mf) != 1 {
		t.Fatalf("%s: %d images, want 1", p, len(mf))
	}
	tag, err := name.NewTag(mf[0].RepoTags[0])
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(p, &tag)
	if err != nil {
		t.Fatal(err)
	}
	a := &archive{repoTags: mf[0].RepoTags, files: map[string]entry{}}
	if a.config, err = img.ConfigFile(); err != nil {
		t.Fatal(err)
	}
	if a.digest, err = img.Digest(); err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	a.layers = len(ls)
	for i, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if !h.ModTime.Equal(time.Unix(0, 0)) {
				t.Errorf("layer %d: %s has mtime %s, want the epoch (reproducible)", i, h.Name, h.ModTime)
			}
			a.files["/"+strings.TrimSuffix(h.Name, "/")] = entry{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, data: data}
		}
		rc.Close()
	}
	return a
}

// run unpacks the file at p of the image and runs it with args, as the image's user would.
func (a *archive) run(t *testing.T, p string, args ...string) string {
	t.Helper()
	e, ok := a.files[p]
	if !ok {
		t.Fatalf("%s not in the image", p)
	}
	if e.typ != tar.TypeReg || e.mode&0o111 == 0 {
		t.Fatalf("%s: type %c mode %o, want an executable file", p, e.typ, e.mode)
	}
	bin := filepath.Join(t.TempDir(), path.Base(p))
	if err := os.WriteFile(bin, e.data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckStatic(bin); err != nil {
		t.Errorf("%s in the image: %v", p, err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("run %s: %v\n%s", p, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestAgentImage(t *testing.T) {
	bin := staticHelper(t)
	spec, err := Agent(Options{Binary: bin, Tag: "1.2.3", Version: "1.2.3", Revision: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "agent.tar")
	info, err := WriteArchive(p, spec)
	if err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, p)
	if want := []string{AgentRepository + ":1.2.3"}; !reflect.DeepEqual(a.repoTags, want) {
		t.Errorf("RepoTags %v, want %v", a.repoTags, want)
	}
	if a.digest.String() != info.Digest {
		t.Errorf("archive digest %s, WriteArchive said %s", a.digest, info.Digest)
	}
	c := a.config.Config
	if !reflect.DeepEqual(c.Entrypoint, []string{BinaryPath}) || c.User != "65532:65532" || c.WorkingDir != Home {
		t.Errorf("config: entrypoint %v user %q workdir %q", c.Entrypoint, c.User, c.WorkingDir)
	}
	if a.config.OS != "linux" || a.config.Architecture == "" {
		t.Errorf("platform %s/%s", a.config.OS, a.config.Architecture)
	}
	for k, v := range map[string]string{LabelTitle: "kueuelab", LabelVersion: "1.2.3", LabelRevision: "abc", LabelSource: "https://github.com/kueuelab/kueuelab"} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if got := a.run(t, BinaryPath, "agent", "--speedup=60"); got != "kueuelab agent --speedup=60" {
		t.Errorf("entrypoint ran as %q", got)
	}
	for p, want := range map[string]entry{
		"/tmp":  {typ: tar.TypeDir, mode: 0o1777},
		Home:    {typ: tar.TypeDir, mode: 0o755, uid: UID, gid: GID},
		"/root": {typ: tar.TypeDir, mode: 0o700},
	} {
		got := a.files[p]
		got.data = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", p, got, want)
		}
	}
	if !strings.Contains(string(a.files["/etc/passwd"].data), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the non-root user:\n%s", a.files["/etc/passwd"].data)
	}

	// The same inputs give the same image.
	again, err := WriteArchive(filepath.Join(t.TempDir(), "again.tar"), spec)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != info.Digest {
		t.Errorf("rebuilt digest %s, first %s: not reproducible", again.Digest, info.Digest)
	}
}

// TestPauseImage: the pause image runs `kueuelab pause` as the non-root user, and its layers are
// the agent image's, blob for blob, so a node that holds both stores kueuelab once.
func TestPauseImage(t *testing.T) {
	bin := staticHelper(t)
	o := Options{Binary: bin, Tag: "1.2.3", Version: "1.2.3"}
	dir := t.TempDir()
	var infos []*Info
	for _, build := range []func(Options) (Spec, error){Agent, Pause} {
		spec, err := build(o)
		if err != nil {
			t.Fatal(err)
		}
		info, err := WriteArchive(filepath.Join(dir, strconv.Itoa(len(infos))+".tar"), spec)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	agent, pause := infos[0], infos[1]
	if !reflect.DeepEqual(pause.Layers, agent.Layers) {
		t.Errorf("pause layers %+v, want the agent's %+v", pause.Layers, agent.Layers)
	}
	if pause.Digest == agent.Digest {
		t.Errorf("the pause image is the agent image (%s)", pause.Digest)
	}
	a := readArchive(t, filepath.Join(dir, "1.tar"))
	c := a.config.Config
	if want := []string{PauseRepository + ":1.2.3"}; !reflect.DeepEqual(a.repoTags, want) {
		t.Errorf("RepoTags %v, want %v", a.repoTags, want)
	}
	if !reflect.DeepEqual(c.Entrypoint, []string{BinaryPath, "pause"}) || len(c.Cmd) != 0 || c.User != "65532:65532" {
		t.Errorf("config: entrypoint %v cmd %v user %q", c.Entrypoint, c.Cmd, c.User)
	}
	if c.Labels[LabelTitle] != "kueuelab-pause" {
		t.Errorf("title %q", c.Labels[LabelTitle])
	}
	if got := a.run(t, BinaryPath, c.Entrypoint[1:]...); got != "kueuelab pause" {
		t.Errorf("entrypoint ran as %q", got)
	}
	if _, err := Pause(Options{Binary: bin}); err == nil {
		t.Errorf("no tag: no error")
	}
}

func TestRunnerImage(t *testing.T) {
	bin := staticHelper(t)
	set := tools.Set{Name: "test-set", Components: []tools.Component{{Name: "etcd"}, {Name: "kube-controller-manager", File: "kube-controller-manager-jobbatch"}}}
	binDir := t.TempDir()
	for _, c := range set.Components {
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(binDir, c.FileName()), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mod := t.TempDir()
	for p, s := range map[string]string{"config/crd/a.yaml": "kind: A\n", "b.yml": "kind: B\n", "main.go": "package x\n"} {
		if err := os.MkdirAll(filepath.Join(mod, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, p), []byte(s), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := Runner(RunnerOptions{Options: Options{Binary: bin, Tag: "1.2.3", Version: "1.2.3"}, Set: set, BinDir: binDir,
		ModuleDirs: map[string]string{"example.com/m@v1.0.0": mod}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "runner.tar")
	if _, err := WriteArchive(p, spec); err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, p)
	if a.repoTags[0] != RunnerRepository+":1.2.3" || a.layers != 4 {
		t.Errorf("runner: tags %v, %d layers (want base, kueuelab, control plane, manifests)", a.repoTags, a.layers)
	}
	setDir := ToolsRoot + "/test-set"
	for _, want := range []string{tools.BinDirEnv + "=" + setDir, tools.ModuleDirEnv + "=" + ModulesRoot,
		"XDG_STATE_HOME=" + ScratchDir + "/state", "XDG_CACHE_HOME=" + ScratchDir + "/cache"} {
		if !slices.Contains(a.config.Config.Env, want) {
			t.Errorf("env %v lacks %s", a.config.Config.Env, want)
		}
	}
	if w := a.files[WorkDir]; w.typ != tar.TypeDir || w.uid != UID || a.config.Config.WorkingDir != WorkDir {
		t.Errorf("work dir %+v, working directory %q", w, a.config.Config.WorkingDir)
	}
	if l := a.config.Config.Labels; l[LabelToolSet] != "test-set" || l[LabelTools] != "etcd,kube-controller-manager-jobbatch" {
		t.Errorf("labels %v", l)
	}
	for _, c := range set.Components {
		f := setDir + "/" + c.FileName()
		if got := a.run(t, f, "--version"); got != c.FileName()+" --version" {
			t.Errorf("%s ran as %q", f, got)
		}
	}
	if got := a.run(t, BinaryPath, "version"); got != "kueuelab version" {
		t.Errorf("entrypoint ran as %q", got)
	}
	mroot := ModulesRoot + "/example.com/m@v1.0.0"
	for f, want := range map[string]string{mroot + "/config/crd/a.yaml": "kind: A\n", mroot + "/b.yml": "kind: B\n"} {
		if e := a.files[f]; string(e.data) != want || e.mode != 0o644 {
			t.Errorf("%s: %q mode %o, want %q 0644", f, e.data, e.mode, want)
		}
	}
	if _, ok := a.files[mroot+"/main.go"]; ok {
		t.Errorf("the runner image carries module sources, want only YAML")
	}
}

func TestStaticOnly(t *testing.T) {
	for _, bad := range []Layer{
		{Name: "relative", Files: []File{{Path: "etc/x", Data: []byte("x")}}},
		{Name: "twice", Files: []File{{Path: "/a", Data: []byte("x")}, {Path: "/a", Data: []byte("y")}}},
		{Name: "file parent", Files: []File{{Path: "/a", Data: []byte("x")}, {Path: "/a/b", Data: []byte("y")}}},
	} {
		if _, err := WriteArchive(filepath.Join(t.TempDir(), "b.tar"), Spec{Ref: "example.com/x:1", Layers: []Layer{bad}}); err == nil {
			t.Errorf("layer %s: no error", bad.Name)
		}
	}
	dyn := ""
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if CheckStatic(p) != nil {
			dyn = p
			break
		}
	}
	if dyn == "" {
		// Machine-dependent, so a plain skip (also in CI): the refusal needs a dynamically linked
		// binary to refuse, and a system whose true is static has none at a known path.
		t.Skip("no dynamically linked /bin/true here to refuse (the bad-layer checks ran)")
	}
	spec, err := Agent(Options{Binary: dyn, Tag: "x"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = WriteArchive(filepath.Join(t.TempDir(), "a.tar"), spec)
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("a dynamically linked binary: err %v, want a refusal naming CGO_ENABLED=0", err)
	}
}

// TestChartRunsTheAgentImage: the chart's default image is what `make image` builds: the
// repository of values.yaml is AgentRepository and the Makefile's VERSION (the tag it passes) is
// the chart's appVersion (the tag the chart defaults to).
func TestChartRunsTheAgentImage(t *testing.T) {
	var values struct {
		Image struct{ Repository, Tag string }
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	for f, v := range map[string]any{"../../charts/kueuelab-agent/values.yaml": &values, "../../charts/kueuelab-agent/Chart.yaml": &chart} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if values.Image.Repository != AgentRepository || values.Image.Tag != "" {
		t.Errorf("chart image %s:%s, want %s with the appVersion as tag", values.Image.Repository, values.Image.Tag, AgentRepository)
	}
	cmd := exec.Command(testutil.Command(t, "make"), "-s", "--no-print-directory", "print-version")
	cmd.Dir = "../.."
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("make print-version: %v", err)
	}
	if got := strings.TrimSpace(out.String()); got != chart.AppVersion || got == "" {
		t.Errorf("make image tags %q, the chart runs tag %q (appVersion)", got, chart.AppVersion)
	}
}

// TestOCIArchive: --format oci writes a tar of an OCI image layout that an OCI reader takes as
// it is: oci-layout and index.json at the top, the manifest named by its full reference
// (containerd's annotation) and its tag (the OCI one), OCI media types, every blob's digest and
// size right (validate.Image reads them all), and the same files, config and layer contents as
// the docker archive, byte for byte the same archive when built again.
func TestOCIArchive(t *testing.T) {
	bin := staticHelper(t)
	spec, err := Agent(Options{Binary: bin, Tag: "1.2.3", Version: "1.2.3", Revision: "abc"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "agent-oci.tar")
	info, err := Write(p, spec, OCI)
	if err != nil {
		t.Fatal(err)
	}
	// Unpack the archive as `ctr images import` reads it.
	lay := filepath.Join(dir, "layout")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if strings.HasPrefix(h.Name, "/") || strings.Contains(h.Name, "..") || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("entry %s (mtime %s): want a relative name dated the epoch", h.Name, h.ModTime)
		}
		dst := filepath.Join(lay, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"oci-layout", "index.json", "blobs/sha256/"} {
		if !slices.Contains(names, want) {
			t.Errorf("archive entries %v lack %s", names, want)
		}
	}
	idx, err := layout.ImageIndexFromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json: %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if a := desc.Annotations; a[AnnotationImageName] != AgentRepository+":1.2.3" || a[AnnotationRefName] != "1.2.3" {
		t.Errorf("index.json annotations %v", a)
	}
	if desc.MediaType != types.OCIManifestSchema1 || desc.Digest.String() != info.Digest {
		t.Errorf("index.json manifest %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIManifestSchema1, info.Digest)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Image(img); err != nil {
		t.Errorf("the OCI layout's image does not validate: %v", err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type %s", m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer media type %s", l.MediaType)
		}
	}

	// The same image as the docker archive, but for the media types.
	dp := filepath.Join(dir, "agent-docker.tar")
	if _, err := Write(dp, spec, Docker); err != nil {
		t.Fatal(err)
	}
	docker := readArchive(t, dp)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cf.Config, docker.config.Config) || !reflect.DeepEqual(cf.RootFS.DiffIDs, docker.config.RootFS.DiffIDs) {
		t.Errorf("OCI config %+v layers %v, docker archive's %+v layers %v", cf.Config, cf.RootFS.DiffIDs, docker.config.Config, docker.config.RootFS.DiffIDs)
	}

	again := filepath.Join(dir, "again.tar")
	if _, err := Write(again, spec, OCI); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(p)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Errorf("the OCI archive built twice differs (%d vs %d bytes): not reproducible", len(a), len(b))
	}
	if _, err := ParseFormat("tar"); err == nil {
		t.Errorf("format tar: no error")
	}
}

// A component image holds its one binary at /usr/local/bin/<name>, runs it as the non-root user
// with the pod naming the command, and carries the version as its tag (how a cluster's tools
// read Kueue's version).
func TestComponentImage(t *testing.T) {
	bin := staticHelper(t)
	spec, err := Component("kueue", "v0.19.2", bin, 1)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "kueue.tar")
	if _, err := WriteArchive(p, spec); err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, p)
	if want := []string{ComponentRegistry + "/kueue:v0.19.2"}; !reflect.DeepEqual(a.repoTags, want) {
		t.Errorf("RepoTags %v, want %v", a.repoTags, want)
	}
	if c := a.config.Config; len(c.Entrypoint) != 0 || c.User != "65532:65532" {
		t.Errorf("config: entrypoint %v user %q", c.Entrypoint, c.User)
	}
	a.run(t, "/usr/local/bin/kueue")
	for _, bad := range [][2]string{{"", "v1"}, {"kueue", ""}} {
		if _, err := Component(bad[0], bad[1], bin, 1); err == nil {
			t.Errorf("Component(%q, %q): no error", bad[0], bad[1])
		}
	}
	dynamic, err := Component("kueue", "v0.19.2", "/bin/sh", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteArchive(filepath.Join(t.TempDir(), "x.tar"), dynamic); err == nil {
		t.Errorf("a dynamically linked binary went into the image")
	}
}
