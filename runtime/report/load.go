// Package report compares the variants of an experiment: per metric a table of each variant's
// mean over repeats with its 95% confidence interval and its delta against the baseline, plots
// (gonum/plot PNGs), and one self-contained HTML file holding both.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// Run is one repeat of a variant: its results read back.
type Run struct {
	Repeat int
	*results.Dir
}

// Variant is every run of one configuration.
type Variant struct {
	Name string
	Runs []Run // by repeat
}

// Input is what a report compares.
type Input struct {
	Name     string
	Baseline string
	Variants []*Variant
}

// Load reads results for a report. Each dir is an experiment output directory (with
// experiment.json: its variants in order, each with r<k> repeat directories), one variant's
// directory (r<k> subdirectories), or a single results directory (summary.json). baseline
// overrides the experiment's; the default is the first variant.
func Load(dirs []string, baseline string) (*Input, error) {
	in := &Input{}
	seen := map[string]bool{}
	add := func(v *Variant) error {
		if seen[v.Name] {
			return fmt.Errorf("report: two variants named %q (rename a directory)", v.Name)
		}
		seen[v.Name] = true
		in.Variants = append(in.Variants, v)
		return nil
	}
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, experiment.ManifestFile)); err == nil {
			var m experiment.Manifest
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, fmt.Errorf("report: %s: %w", filepath.Join(d, experiment.ManifestFile), err)
			}
			if in.Name == "" {
				in.Name, in.Baseline = m.Name, m.Baseline
			}
			for _, name := range m.Variants {
				v, err := loadVariant(filepath.Join(d, name), name)
				if err != nil {
					return nil, err
				}
				if len(v.Runs) == 0 {
					continue // not run yet: the report shows what is done
				}
				if err := add(v); err != nil {
					return nil, err
				}
			}
			continue
		}
		name := filepath.Base(filepath.Clean(d))
		if _, err := os.Stat(filepath.Join(d, results.SummaryFile)); err == nil {
			r, err := results.Load(d)
			if err != nil {
				return nil, err
			}
			if err := add(&Variant{Name: name, Runs: []Run{{Repeat: 0, Dir: r}}}); err != nil {
				return nil, err
			}
			continue
		}
		v, err := loadVariant(d, name)
		if err != nil {
			return nil, err
		}
		if len(v.Runs) == 0 {
			return nil, fmt.Errorf("report: %s holds no results (no %s, no r<k>/ runs, no %s)", d, experiment.ManifestFile, results.SummaryFile)
		}
		if err := add(v); err != nil {
			return nil, err
		}
	}
	if len(in.Variants) == 0 {
		return nil, errors.New("report: no finished runs in the given directories")
	}
	if baseline != "" {
		in.Baseline = baseline
	}
	if in.Baseline == "" || !seen[in.Baseline] {
		if baseline != "" {
			return nil, fmt.Errorf("report: --baseline %q: no such variant (have %s)", baseline, strings.Join(in.names(), ", "))
		}
		in.Baseline = in.Variants[0].Name
	}
	if in.Name == "" {
		in.Name = strings.Join(in.names(), " vs ")
	}
	return in, nil
}

func (in *Input) names() []string {
	out := make([]string, len(in.Variants))
	for i, v := range in.Variants {
		out[i] = v.Name
	}
	return out
}

// loadVariant reads the finished repeats (r<k> with a done marker) of a variant directory.
func loadVariant(dir, name string) (*Variant, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	v := &Variant{Name: name}
	for _, e := range entries {
		k, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "r"))
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "r") || err != nil {
			continue
		}
		rd := filepath.Join(dir, e.Name())
		if _, ok := experiment.ReadDone(rd); !ok {
			continue // unfinished: rerun the experiment to complete it
		}
		r, err := results.Load(rd)
		if err != nil {
			return nil, err
		}
		v.Runs = append(v.Runs, Run{Repeat: k, Dir: r})
	}
	sort.Slice(v.Runs, func(i, j int) bool { return v.Runs[i].Repeat < v.Runs[j].Repeat })
	return v, nil
}
