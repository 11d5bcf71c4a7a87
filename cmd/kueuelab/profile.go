package main

import (
	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/model/gen"
)

func newProfileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Inspect generator profiles (the priors of 'kueuelab gen')",
		Long: `A profile is one versioned YAML file holding every prior of the workload generator: arrival
shape, family mix, GPU footprint, durations, intensity ranges, pod sizes and intent classes. The
default is embedded in kueuelab; 'kueuelab gen --profile FILE' uses another one.`,
		Example: `  kueuelab profile show
  kueuelab profile show --profile my.yaml`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newProfileShowCmd())
	return cmd
}

func newProfileShowCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Validate a generator profile and print it as YAML",
		Long: `show prints a generator profile after validating it: the embedded default, or the file
given with --profile. The output is a valid profile to copy, edit and pass to 'kueuelab gen --profile'.
A profile that fails validation is not printed; every problem is reported with file, line and field.`,
		Example: `  # the embedded default priors
  kueuelab profile show

  # start your own profile from the default and check it
  kueuelab profile show > my.yaml
  kueuelab profile show --profile my.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data := gen.DefaultProfileYAML()
			if path != "" {
				var err error
				if _, data, err = gen.LoadProfile(path); err != nil {
					return err
				}
			} else if _, err := gen.DefaultProfile(); err != nil {
				return err
			}
			_, err := cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().StringVar(&path, "profile", "", "profile YAML to validate and print (default: the embedded profile)")
	return cmd
}
