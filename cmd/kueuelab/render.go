package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/validate"
)

type renderFlags struct {
	trace, cluster, mapping string
	target                  string
	speedup                 float64
	image, command          string
	output, outDir          string
	retarget                bool
	seed                    uint64
	noValidate, skipInvalid bool
	lenient                 bool
}

func newRenderCmd() *cobra.Command {
	f := &renderFlags{}
	cmd := &cobra.Command{
		Use:   "render --trace TRACE --cluster SPEC",
		Short: "Render a trace and a cluster spec into Kueue-queued manifests",
		Long: `render turns every logical workload of a trace into the object an expert would write for it
(` + kindList() + `,
chosen per family by --mapping), queued through Kueue, and the cluster spec into KWOK nodes, ResourceFlavors,
ClusterQueues, Cohorts, LocalQueues and WorkloadPriorityClasses (kueue.x-k8s.io/v1beta2, which Kueue v0.15
and later serve). Every object is validated against
the upstream CRD schemas unless --no-validate.

Output goes to stdout as a multi-document YAML (or JSON lines, -o json) stream, cluster objects
first, or with --out-dir to 00-cluster.yaml plus one file per workload in submit order.

The cluster objects include what the mapped kinds refer to (a TrainJob's ClusterTrainingRuntime).

A mapping file chooses kinds per family, e.g.
` + mappingHelp(),
		Example: `  kueuelab render --trace t.jsonl --cluster examples/clusters/small.yaml --out-dir out/
  kueuelab render --trace t.jsonl --cluster examples/clusters/small.yaml --target real --speedup 60 | kubectl apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRender(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", "", "trace file (JSONL, optionally gzip; - for stdin)")
	fl.StringVar(&f.cluster, "cluster", "", "cluster spec YAML")
	fl.StringVar(&f.mapping, "mapping", "", "mapping file choosing the kind per family; families it omits keep the default kind shown above")
	fl.StringVar(&f.target, "target", string(render.TargetKWOK), "kwok (pause image, KWOK tolerations) or real (containers sleep for the workload's duration ÷ speedup)")
	fl.Float64Var(&f.speedup, "speedup", 1, "time compression for --target real")
	fl.StringVar(&f.image, "image", render.DefaultRealImage, "container image for --target real")
	fl.StringVar(&f.command, "command-template", render.DefaultCommandTemplate, "shell command for --target real, a Go template over .DurationSec .Speedup .SleepSec .Role")
	fl.StringVarP(&f.output, "output", "o", string(render.YAML), "output format: yaml or json")
	fl.StringVar(&f.outDir, "out-dir", "", "write 00-cluster.yaml and one file per workload here instead of stdout")
	fl.BoolVar(&f.retarget, "retarget", false, "give each GPU workload a GPU family that exists in the cluster (weighted by capacity)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of --retarget's choices")
	fl.BoolVar(&f.noValidate, "no-validate", false, "skip validating every object against the upstream CRD schemas")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "report workloads that cannot be rendered and go on")
	fl.BoolVar(&f.lenient, "lenient", false, "skip bad trace lines (they are counted and listed)")
	_ = cmd.MarkFlagRequired("trace")
	_ = cmd.MarkFlagRequired("cluster")
	return cmd
}

func runRender(cmd *cobra.Command, f *renderFlags) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	format := render.Format(f.output)
	if format != render.YAML && format != render.JSON {
		return fmt.Errorf("--output %q: want yaml or json", f.output)
	}
	opts := render.Options{Target: render.Target(f.target), Speedup: f.speedup, Image: f.image,
		Warn: func(msg string) { fmt.Fprintln(stderr, "warning:", msg) }}
	tmpl, err := render.ParseCommandTemplate(f.command)
	if err != nil {
		return fmt.Errorf("--command-template: %w", err)
	}
	opts.Command = tmpl
	reg := render.DefaultRegistry()
	mapping := render.DefaultMapping()
	if f.mapping != "" {
		if mapping, err = render.LoadMapping(f.mapping, reg); err != nil {
			return err
		}
	}
	r, err := render.NewRenderer(reg, mapping, opts)
	if err != nil {
		return err
	}
	spec, err := cluster.Load(f.cluster)
	if err != nil {
		return err
	}
	clusterObjs, err := spec.Objects(cluster.Options{})
	if err != nil {
		return err
	}
	clusterObjs = append(clusterObjs, reg.ClusterObjects(mapping, r.Options())...)
	var check render.Check
	if !f.noValidate {
		v, err := validate.New(render.DefaultRegistry().AddToScheme)
		if err != nil {
			return err
		}
		check = func(o client.Object) error { return v.Validate(o) }
		for _, o := range clusterObjs {
			if err := check(o); err != nil {
				return fmt.Errorf("cluster spec %s: %s %s: %w", f.cluster, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
			}
		}
	}
	tr, err := trace.LoadWorkloads(ctx, f.trace, trace.Options{Lenient: f.lenient, Warn: func(msg string) { fmt.Fprintln(stderr, "warning:", msg) }})
	if err != nil {
		return err
	}
	for _, e := range tr.Skipped {
		fmt.Fprintln(stderr, "skipped:", e)
	}

	out, err := newRenderOutput(cmd.OutOrStdout(), f.outDir, format, len(tr.Workloads))
	if err != nil {
		return err
	}
	if err := out.cluster(clusterObjs); err != nil {
		return err
	}
	invalid := 0
	err = r.RenderAll(ctx, tr.Workloads, tr.Jobs, spec.Placer(f.seed, f.retarget), check, format, runtime.GOMAXPROCS(0), func(res render.Result) error {
		if res.Err != nil {
			if !f.skipInvalid {
				return res.Err
			}
			invalid++
			fmt.Fprintln(stderr, "skipped:", res.Err)
			return nil
		}
		return out.workload(res)
	})
	if cerr := out.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "rendered %d of %d workloads (%d invalid skipped, %d trace problems skipped)\n",
		len(tr.Workloads)-invalid, len(tr.Workloads), invalid, tr.SkippedCount)
	return nil
}

// renderOutput writes to stdout or to a directory of files.
type renderOutput struct {
	enc    *render.Encoder // stdout mode
	dir    string
	format render.Format
	width  int
}

func newRenderOutput(stdout io.Writer, dir string, format render.Format, count int) (*renderOutput, error) {
	o := &renderOutput{dir: dir, format: format, width: len(strconv.Itoa(count))}
	if dir == "" {
		enc, err := render.NewEncoder(stdout, format)
		o.enc = enc
		return o, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--out-dir: %w", err)
	}
	return o, nil
}

func (o *renderOutput) ext() string { return "." + string(o.format) }

func (o *renderOutput) cluster(objs []client.Object) error {
	if o.enc != nil {
		for _, obj := range objs {
			if err := o.enc.Encode(obj); err != nil {
				return err
			}
		}
		return nil
	}
	path := filepath.Join(o.dir, "00-cluster"+o.ext())
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	enc, err := render.NewEncoder(file, o.format)
	if err == nil {
		for _, obj := range objs {
			if err = enc.Encode(obj); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = enc.Flush()
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (o *renderOutput) workload(res render.Result) error {
	if o.enc != nil {
		return o.enc.WriteManifest(res.Manifest)
	}
	path := filepath.Join(o.dir, fmt.Sprintf("%0*d-%s%s", o.width, res.Index+1, render.Name(res.Workload.WorkloadID), o.ext()))
	if err := os.WriteFile(path, res.Manifest, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (o *renderOutput) close() error {
	if o.enc != nil {
		return o.enc.Flush()
	}
	return nil
}
