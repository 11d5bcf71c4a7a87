package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
)

// Merge gathers the finished runs of one experiment from result directories (the shards of an
// Indexed Job fetched from where its pods wrote them, or several partial runs of `experiment run`)
// into dst, in the layout `experiment run` writes, and returns the runs no source finished, by
// index (variant × repeats + repeat). Runs dst already holds are kept.
func Merge(dst string, srcs []string, out io.Writer) (missing []string, err error) {
	if out == nil {
		out = io.Discard
	}
	if len(srcs) == 0 {
		return nil, errors.New("merge: no source directories")
	}
	var m *Manifest
	for _, src := range srcs {
		b, err := os.ReadFile(filepath.Join(src, ManifestFile))
		if err != nil {
			return nil, fmt.Errorf("merge: %s is not an experiment's results (no %s): %w", src, ManifestFile, err)
		}
		var sm Manifest
		if err := json.Unmarshal(b, &sm); err != nil {
			return nil, fmt.Errorf("merge: %s: %w", filepath.Join(src, ManifestFile), err)
		}
		if m == nil {
			m = &sm
			continue
		}
		if sm.Name != m.Name || !reflect.DeepEqual(sm.Variants, m.Variants) || sm.Repeats != m.Repeats {
			return nil, fmt.Errorf("merge: %s is experiment %q (variants %v × %d repeats), %s is %q (%v × %d): not the same experiment",
				srcs[0], m.Name, m.Variants, m.Repeats, src, sm.Name, sm.Variants, sm.Repeats)
		}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, err
	}
	same := func(a, b string) bool {
		aa, err1 := filepath.Abs(a)
		bb, err2 := filepath.Abs(b)
		return err1 == nil && err2 == nil && aa == bb
	}
	copied := 0
	for vi, v := range m.Variants {
		for _, src := range srcs {
			if p := filepath.Join(src, v, SpecFile); fileExists(p) && !same(src, dst) && !fileExists(filepath.Join(dst, v, SpecFile)) {
				if err := copyTree(p, filepath.Join(dst, v, SpecFile)); err != nil {
					return nil, err
				}
			}
		}
		for k := range m.Repeats {
			rel := filepath.Join(v, "r"+strconv.Itoa(k))
			if _, ok := ReadDone(filepath.Join(dst, rel)); ok {
				continue
			}
			found := false
			for _, src := range srcs {
				if _, ok := ReadDone(filepath.Join(src, rel)); !ok || same(src, dst) {
					continue
				}
				// Copied beside and renamed into place: a merge cut short never leaves a done
				// marker next to half the results.
				if err := os.MkdirAll(filepath.Join(dst, v), 0o755); err != nil {
					return nil, err
				}
				tmp, err := os.MkdirTemp(filepath.Join(dst, v), ".r"+strconv.Itoa(k)+"-")
				if err != nil {
					return nil, err
				}
				if err := os.Chmod(tmp, 0o755); err != nil {
					return nil, err
				}
				if err := copyTree(filepath.Join(src, rel), tmp); err != nil {
					os.RemoveAll(tmp)
					return nil, err
				}
				if err := os.RemoveAll(filepath.Join(dst, rel)); err != nil {
					return nil, err
				}
				if err := os.Rename(tmp, filepath.Join(dst, rel)); err != nil {
					return nil, err
				}
				copied++
				found = true
				break
			}
			if !found {
				missing = append(missing, fmt.Sprintf("index %d (variant %s repeat %d)", vi*m.Repeats+k, v, k))
			}
		}
	}
	for _, src := range srcs {
		if d := filepath.Join(src, "traces"); dirExists(d) && !same(src, dst) {
			if err := copyTree(d, filepath.Join(dst, "traces")); err != nil {
				return nil, err
			}
		}
	}
	if err := writeJSON(filepath.Join(dst, ManifestFile), m); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "experiment %s: %d of %d runs in %s (%d copied now)\n", m.Name, len(m.Variants)*m.Repeats-len(missing), len(m.Variants)*m.Repeats, dst, copied)
	return missing, nil
}

func fileExists(p string) bool { st, err := os.Stat(p); return err == nil && st.Mode().IsRegular() }
func dirExists(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }

// copyTree copies a file or a directory tree; files already at the destination are kept.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() || fileExists(target) {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		outF, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(outF, in); err != nil {
			outF.Close()
			return err
		}
		return outF.Close()
	})
}
