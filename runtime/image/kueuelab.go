package image

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

// The images kueuelab builds. The agent image is what charts/kueuelab-agent runs (its
// values.yaml names AgentRepository, its appVersion is the tag); the runner image adds the
// pinned control-plane binaries and the upstream manifests a local cluster installs, so one pod
// can run a whole replay (`experiment render-job`). The pause image is the agent image run as
// `kueuelab pause`: the sandbox container of a real node's pods, where there is no registry to
// pull upstream's from; a repository of its own keeps its tags apart from the agent's.
const (
	AgentRepository  = "ghcr.io/kueuelab/kueuelab"
	RunnerRepository = "ghcr.io/kueuelab/kueuelab-runner"
	PauseRepository  = "ghcr.io/kueuelab/kueuelab-pause"
)

// Paths and identity inside the images.
const (
	BinaryPath = "/usr/local/bin/kueuelab"
	// ToolsRoot holds the tool set's binaries in ToolsRoot/<set name>, as the tools cache does.
	ToolsRoot = "/opt/kueuelab/bin"
	// ModulesRoot holds the manifest modules' YAML files in ModulesRoot/<module>@<version>.
	ModulesRoot = "/opt/kueuelab/modules"
	// Home is the non-root user's home; ScratchDir the state and cache root of the runner (a pod
	// mounts an emptyDir there).
	Home       = "/home/nonroot"
	ScratchDir = "/tmp/kueuelab"
	// WorkDir is the runner's working directory: `experiment render-job` mounts the inputs and
	// the results volume under it.
	WorkDir = "/work"
	// UID and GID are distroless' "nonroot" user: the chart's runAsNonRoot needs a numeric user.
	UID = 65532
	GID = 65532
)

// Labels on every image (OCI annotation keys), plus the tool set on the runner image.
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelDesc     = "org.opencontainers.image.description"
	LabelToolSet  = "io.kueuelab.tools.set"
	LabelTools    = "io.kueuelab.tools"
)

// Options are the inputs of the kueuelab images.
type Options struct {
	// Binary is a static kueuelab binary for linux/GOARCH.
	Binary string
	// Tag is the images' tag; Version and Revision go into the labels.
	Tag, Version, Revision string
	// Created is the images' time (zero: the Unix epoch; `make image` passes SOURCE_DATE_EPOCH's).
	Created time.Time
	// CompressionLevel is the layers' gzip level (0: default).
	CompressionLevel int
}

// Agent is the agent image: the kueuelab binary on an empty base, run as non-root; the chart
// passes `agent ...` as arguments.
func Agent(o Options) (Spec, error) {
	if o.Tag == "" {
		return Spec{}, fmt.Errorf("image: no tag")
	}
	return Spec{
		Ref:        AgentRepository + ":" + o.Tag,
		Layers:     []Layer{base(), binaryLayer(o.Binary)},
		Entrypoint: []string{BinaryPath},
		User:       userSpec(),
		Env:        []string{"PATH=/usr/local/bin", "HOME=" + Home},
		WorkingDir: Home,
		Labels: labels(o, "kueuelab",
			"kueuelab: the agent that drives fake pods on KWOK nodes (charts/kueuelab-agent), and the CLI"),
		Created:          o.Created,
		CompressionLevel: o.CompressionLevel,
	}, nil
}

// Pause is the pause image: the agent image's layers (so a runtime holding both stores them
// once) with `kueuelab pause` as entrypoint, which holds a pod sandbox's namespaces and reaps the
// orphans of its PID namespace until SIGTERM.
func Pause(o Options) (Spec, error) {
	s, err := Agent(o)
	if err != nil {
		return Spec{}, err
	}
	s.Ref = PauseRepository + ":" + o.Tag
	s.Entrypoint = []string{BinaryPath, "pause"}
	s.Labels = labels(o, "kueuelab-pause", "kueuelab pause: the sandbox container of a real node's pods")
	return s, nil
}

// RunnerOptions add the control-plane binaries and manifests of the runner image.
type RunnerOptions struct {
	Options
	// Set is the tool set and BinDir the directory holding its binaries (the tools cache).
	Set    tools.Set
	BinDir string
	// ModuleDirs gives the directory of each manifest module (tools.ManifestModules); the YAML
	// files below it are copied.
	ModuleDirs map[string]string
}

// Runner is the runner image: the agent image's content plus the set's binaries and the manifest
// modules' YAML, with the environment that points kueuelab at them and keeps every state and cache
// dir under ScratchDir.
func Runner(o RunnerOptions) (Spec, error) {
	s, err := Agent(o.Options)
	if err != nil {
		return Spec{}, err
	}
	bins, err := tools.Locate(o.BinDir, o.Set)
	if err != nil {
		return Spec{}, err
	}
	setDir := path.Join(ToolsRoot, o.Set.Name)
	var binFiles []File
	var names []string
	for _, c := range o.Set.Components {
		binFiles = append(binFiles, File{Path: path.Join(setDir, c.FileName()), Source: bins[c.Name], Mode: 0o755, Static: true})
		names = append(names, c.FileName())
	}
	var modFiles []File
	mods := make([]string, 0, len(o.ModuleDirs))
	for m := range o.ModuleDirs {
		mods = append(mods, m)
	}
	sort.Strings(mods)
	for _, m := range mods {
		fs, err := yamlFiles(o.ModuleDirs[m], path.Join(ModulesRoot, m))
		if err != nil {
			return Spec{}, fmt.Errorf("module %s: %w", m, err)
		}
		modFiles = append(modFiles, fs...)
	}
	s.Ref = RunnerRepository + ":" + o.Tag
	s.Layers[0].Files = append(s.Layers[0].Files, File{Path: WorkDir, Dir: true, Mode: 0o755, UID: UID, GID: GID})
	s.WorkingDir = WorkDir
	s.Layers = append(s.Layers, Layer{Name: "control plane " + o.Set.Name, Files: binFiles},
		Layer{Name: fmt.Sprintf("YAML of %d manifest modules", len(mods)), Files: modFiles})
	s.Env = append(s.Env,
		tools.BinDirEnv+"="+setDir,
		tools.ModuleDirEnv+"="+ModulesRoot,
		"XDG_STATE_HOME="+ScratchDir+"/state",
		"XDG_CACHE_HOME="+ScratchDir+"/cache")
	s.Labels = labels(o.Options, "kueuelab-runner",
		"kueuelab with the pinned control plane: one replay (local cluster, runner, agent) per pod")
	s.Labels[LabelToolSet] = o.Set.Name
	s.Labels[LabelTools] = strings.Join(names, ",")
	return s, nil
}

// ComponentRegistry holds the images of the control-plane components a local cluster runs as
// pods on its real node (Kueue's Deployment, kube-scheduler's static pod), as a user's kind
// cluster does: ComponentRegistry/<name>:<version>.
const ComponentRegistry = "ghcr.io/kueuelab"

// Component is such an image: the static binary bin at /usr/local/bin/<name> on the empty base,
// no entrypoint (each pod names its command), run as non-root. The tag is the component's
// version, which is how a cluster's tools read it (Kueue's image tag).
func Component(name, version, bin string, compression int) (Spec, error) {
	if name == "" || version == "" {
		return Spec{}, fmt.Errorf("image: component %q version %q", name, version)
	}
	return Spec{
		Ref:              ComponentRegistry + "/" + name + ":" + version,
		Layers:           []Layer{base(), {Name: name + " " + version, Files: []File{{Path: path.Join("/usr/local/bin", name), Source: bin, Mode: 0o755, Static: true}}}},
		User:             userSpec(),
		Env:              []string{"PATH=/usr/local/bin", "HOME=" + Home},
		WorkingDir:       Home,
		Labels:           map[string]string{LabelTitle: name, LabelVersion: version, LabelDesc: name + " as kueuelab builds it (tools cache)"},
		CompressionLevel: compression,
	}, nil
}

// ManifestModuleDirs locates every manifest module (tools.ManifestModules) in the module cache.
func ManifestModuleDirs(ctx context.Context, goBin string) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range tools.ManifestModules() {
		d, err := tools.ModuleDir(ctx, goBin, m)
		if err != nil {
			return nil, err
		}
		out[m] = d
	}
	return out, nil
}

func userSpec() string { return strconv.Itoa(UID) + ":" + strconv.Itoa(GID) }

// base is what a program expects of a Linux root file system and nothing more: the non-root
// user, a home it owns, and a world-writable /tmp.
func base() Layer {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, GID, Home)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	return Layer{Name: "base: users, /tmp, home", Files: []File{
		{Path: "/etc/passwd", Data: []byte(passwd)},
		{Path: "/etc/group", Data: []byte(group)},
		{Path: "/root", Dir: true, Mode: 0o700},
		{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky},
		{Path: Home, Dir: true, Mode: 0o755, UID: UID, GID: GID},
	}}
}

func binaryLayer(bin string) Layer {
	return Layer{Name: "kueuelab", Files: []File{{Path: BinaryPath, Source: bin, Mode: 0o755, Static: true}}}
}

func labels(o Options, title, desc string) map[string]string {
	l := map[string]string{
		LabelTitle:   title,
		LabelDesc:    desc,
		LabelVersion: o.Version,
		LabelSource:  "https://github.com/kueuelab/kueuelab",
	}
	if o.Revision != "" {
		l[LabelRevision] = o.Revision
	}
	return l
}

// yamlFiles lists the YAML files under dir as image files under dst (the module cache's files
// are read-only; the image gets 0644).
func yamlFiles(dir, dst string) ([]File, error) {
	var out []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, File{Path: path.Join(dst, filepath.ToSlash(rel)), Source: p})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no YAML files in %s", dir)
	}
	return out, nil
}
