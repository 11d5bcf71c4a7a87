// Package image builds kueuelab's container images without a container runtime: each layer is a
// tar stream written here (sorted, fixed times and owners, so the same inputs give the same
// digest), assembled on an empty base with go-containerregistry and written as an image archive
// that `kind load image-archive`, `ctr images import`, `docker load` and `podman load` accept.
// Every executable put into an image must be a static ELF binary: there is no libc to link against.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer.
type File struct {
	// Path is the absolute path in the image.
	Path string
	// Source is a regular file on this machine to copy; Data is used when Source is empty.
	Source string
	Data   []byte
	// Dir makes the entry a directory.
	Dir bool
	// Mode holds the permission bits (and sticky bit); 0 means 0644 for files, 0755 for dirs.
	Mode     fs.FileMode
	UID, GID int
	// Static requires Source to be a statically linked ELF executable.
	Static bool
}

// Layer is one image layer.
type Layer struct {
	// Name says what the layer holds (the history entry's comment).
	Name  string
	Files []File
}

// Spec is one image.
type Spec struct {
	// Ref is the image's reference, repository and tag (e.g. ghcr.io/kueuelab/kueuelab:0.1.0).
	Ref        string
	Layers     []Layer
	Entrypoint []string
	Cmd        []string
	User       string
	Env        []string
	WorkingDir string
	Labels     map[string]string
	// Created is the image's creation time and every file's modification time (zero: the Unix
	// epoch, as ko does, so builds are reproducible).
	Created time.Time
	// CompressionLevel is the gzip level of the layers (0: gzip.DefaultCompression).
	CompressionLevel int
}

// Info describes a written archive.
type Info struct {
	Ref    string
	Digest string // the image manifest's digest
	// ArchiveBytes is the size of the archive file; CompressedBytes the sum of the layers as a
	// registry stores them; UncompressedBytes the sum of the layers' tar streams.
	ArchiveBytes, CompressedBytes, UncompressedBytes int64
	Layers                                           []LayerInfo
}

// LayerInfo is one layer of a written image.
type LayerInfo struct {
	Name                               string
	Digest                             string
	CompressedBytes, UncompressedBytes int64
}

// Format is an image archive's layout.
type Format string

const (
	// Docker is the docker-archive layout (`docker save`): manifest.json naming the reference, the
	// config and one gzipped tar per layer, with Docker's media types. Every loader takes it,
	// Docker before v25 included.
	Docker Format = "docker"
	// OCI is a tar of an OCI image layout (oci-layout, index.json, blobs/sha256/...) with OCI
	// media types, the reference in index.json's annotations: what `ctr images import`, `kind load
	// image-archive`, `podman load`, Docker v25+ and skopeo's oci-archive: transport read.
	OCI Format = "oci"
)

// ParseFormat checks an archive format's name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Docker, OCI:
		return f, nil
	}
	return "", fmt.Errorf("image format %q: want %s or %s", s, Docker, OCI)
}

// AnnotationImageName is containerd's annotation for an image's full reference in an OCI
// layout's index.json (`ctr images import` names the image by it; the OCI ref.name annotation
// carries only the tag, as `docker save` v25+ writes it).
const AnnotationImageName = "io.containerd.image.name"

// AnnotationRefName is the OCI image-spec's annotation naming a manifest in an index.
const AnnotationRefName = "org.opencontainers.image.ref.name"

// WriteArchive builds spec and writes it to path as a docker-archive image archive.
func WriteArchive(path string, spec Spec) (*Info, error) {
	return Write(path, spec, Docker)
}

// Write builds spec and writes it to path as an image archive in format f. The file appears
// complete or not at all.
func Write(path string, spec Spec, f Format) (*Info, error) {
	ref, err := name.NewTag(spec.Ref, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", spec.Ref, err)
	}
	if _, err := ParseFormat(string(f)); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "kueuelab-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	img, infos, err := build(spec, tmp, f)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	part := path + ".part"
	if f == OCI {
		err = writeOCIArchive(part, filepath.Join(tmp, "layout"), ref, img, spec.Created)
	} else {
		err = tarball.WriteToFile(part, ref, img)
	}
	if err != nil {
		os.Remove(part)
		return nil, fmt.Errorf("image %s: write %s: %w", spec.Ref, path, err)
	}
	if err := os.Rename(part, path); err != nil {
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	info := &Info{Ref: ref.String(), Digest: d.String(), ArchiveBytes: st.Size(), Layers: infos}
	for _, l := range infos {
		info.CompressedBytes += l.CompressedBytes
		info.UncompressedBytes += l.UncompressedBytes
	}
	return info, nil
}

// writeOCIArchive writes img as an OCI image layout in dir and tars that directory to path:
// entries sorted, dated created, owned by root, so the archive is as reproducible as the image.
func writeOCIArchive(path, dir string, ref name.Tag, img v1.Image, created time.Time) error {
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
		AnnotationRefName:   ref.TagStr(),
		AnnotationImageName: ref.String(),
	})); err != nil {
		return err
	}
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	var files []File
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: "/" + filepath.ToSlash(rel), Source: p, Dir: d.IsDir()})
		return nil
	})
	if err != nil {
		return err
	}
	// The layout's tar has relative names (oci-layout, index.json, blobs/...), as an
	// oci-archive has; writeLayer's absolute paths are made relative by the tar it writes.
	_, err = writeLayer(path, Layer{Name: "oci-layout", Files: files}, created.UTC())
	return err
}

// build assembles the image; layer tar streams are written under tmp.
func build(spec Spec, tmp string, f Format) (v1.Image, []LayerInfo, error) {
	created := spec.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	level := spec.CompressionLevel
	if level == 0 {
		level = gzip.DefaultCompression
	}
	var adds []mutate.Addendum
	var infos []LayerInfo
	for i, l := range spec.Layers {
		p := fmt.Sprintf("%s/layer-%d.tar", tmp, i)
		size, err := writeLayer(p, l, created)
		if err != nil {
			return nil, nil, fmt.Errorf("layer %q: %w", l.Name, err)
		}
		opts := []tarball.LayerOption{tarball.WithCompressionLevel(level), tarball.WithCompressedCaching}
		if f == OCI {
			opts = append(opts, tarball.WithMediaType(types.OCILayer))
		}
		layer, err := tarball.LayerFromFile(p, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("layer %q: %w", l.Name, err)
		}
		d, err := layer.Digest()
		if err != nil {
			return nil, nil, fmt.Errorf("layer %q: %w", l.Name, err)
		}
		csize, err := layer.Size()
		if err != nil {
			return nil, nil, fmt.Errorf("layer %q: %w", l.Name, err)
		}
		infos = append(infos, LayerInfo{Name: l.Name, Digest: d.String(), CompressedBytes: csize, UncompressedBytes: size})
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: created}, CreatedBy: "kueuelab image build", Comment: l.Name}})
	}
	base := empty.Image
	if f == OCI {
		base = mutate.MediaType(mutate.ConfigMediaType(base, types.OCIConfigJSON), types.OCIManifestSchema1)
	}
	img, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.Cmd = spec.Cmd
	cf.Config.User = spec.User
	cf.Config.Env = spec.Env
	cf.Config.WorkingDir = spec.WorkingDir
	cf.Config.Labels = spec.Labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, nil, err
	}
	return img, infos, nil
}

// writeLayer writes the layer's tar stream to p: entries sorted by path, every missing parent
// directory added (0755, root), times fixed to created. It returns the stream's size.
func writeLayer(p string, l Layer, created time.Time) (int64, error) {
	entries := map[string]File{}
	for _, f := range l.Files {
		clean := path.Clean("/" + f.Path)
		if clean != f.Path || clean == "/" {
			return 0, fmt.Errorf("path %q: want a clean absolute path", f.Path)
		}
		if _, dup := entries[clean]; dup {
			return 0, fmt.Errorf("path %s: listed twice", clean)
		}
		entries[clean] = f
	}
	for p := range entries {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = File{Path: d, Dir: true}
			} else if !entries[d].Dir {
				return 0, fmt.Errorf("path %s: parent %s is a file", p, d)
			}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	out, err := os.Create(p)
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: out}
	tw := tar.NewWriter(cw)
	for _, p := range paths {
		if err := writeEntry(tw, entries[p], created); err != nil {
			out.Close()
			return 0, fmt.Errorf("%s: %w", p, err)
		}
	}
	if err := errors.Join(tw.Close(), out.Close()); err != nil {
		return 0, err
	}
	return cw.n, nil
}

func writeEntry(tw *tar.Writer, f File, created time.Time) error {
	name := strings.TrimPrefix(f.Path, "/")
	h := &tar.Header{Name: name, ModTime: created, Uid: f.UID, Gid: f.GID, Format: tar.FormatPAX}
	if f.Dir {
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, name+"/", tarMode(f.Mode, 0o755)
		return tw.WriteHeader(h)
	}
	h.Typeflag, h.Mode = tar.TypeReg, tarMode(f.Mode, 0o644)
	if f.Source == "" {
		h.Size = int64(len(f.Data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(f.Data)
		return err
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("source %s is not a regular file", f.Source)
	}
	if f.Static {
		if err := CheckStatic(f.Source); err != nil {
			return err
		}
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, src)
	if err == nil && n != st.Size() {
		err = fmt.Errorf("source %s changed while it was copied", f.Source)
	}
	return err
}

// tarMode is the permission bits (with setuid/setgid/sticky) of m, or def when m has none.
func tarMode(m fs.FileMode, def int64) int64 {
	if m&fs.ModePerm == 0 && m&(fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid) == 0 {
		return def
	}
	v := int64(m & fs.ModePerm)
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	return v
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// CheckStatic returns an error unless path is an ELF executable without a program interpreter or
// shared-library dependencies: an image built from scratch has no dynamic loader or libc.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 256))
			return fmt.Errorf("%s is dynamically linked (interpreter %s): build it with CGO_ENABLED=0", path, bytes.TrimRight(interp, "\x00"))
		}
	}
	libs, err := f.ImportedLibraries()
	if err == nil && len(libs) > 0 {
		return fmt.Errorf("%s needs shared libraries %s: build it with CGO_ENABLED=0", path, strings.Join(libs, ", "))
	}
	return nil
}
