package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/validate"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Validate manifests against the upstream CRD schemas the API server would use",
		Long: `validate checks every object in the given YAML/JSON files (directories are searched
recursively for .yaml, .yml and .json files) the way the API server checks a create request: the
openAPIV3Schema of the pinned upstream CRDs (unknown fields, types, required fields, enums, list
uniqueness, CEL rules) and metadata; built-in kinds and Katib Experiments by strict decoding.
Mutating webhooks are not run. It prints one line per error and exits non-zero if any object is
invalid.`,
		Example: "  kueuelab validate out/\n  kueuelab validate 00-cluster.yaml w-000001.yaml",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := manifestFiles(args)
			if err != nil {
				return err
			}
			v, err := validate.New(render.DefaultRegistry().AddToScheme)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			var objects, invalid, problems int
			for _, name := range files {
				f, err := os.Open(name)
				if err != nil {
					return err
				}
				res := v.ValidateStream(cmd.Context(), f, name)
				f.Close()
				for _, e := range res.Errors {
					fmt.Fprintln(out, e)
				}
				objects += res.Objects
				invalid += res.Invalid
				problems += len(res.Errors)
				if err := cmd.Context().Err(); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "%d files, %d objects, %d invalid\n", len(files), objects, invalid)
			if problems > 0 {
				return fmt.Errorf("validate: %d invalid objects, %d errors", invalid, problems)
			}
			return nil
		},
	}
}

// manifestFiles expands the arguments into a sorted, de-duplicated list of manifest files.
func manifestFiles(args []string) ([]string, error) {
	seen := map[string]bool{}
	var files []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			add(arg)
			continue
		}
		err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					add(p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}
