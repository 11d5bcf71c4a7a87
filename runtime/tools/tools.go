// Package tools builds the pinned control-plane binaries (etcd, Kubernetes, KWOK, Kueue, and the
// operator of every kind in render's registry), and a real node's kubelet and kube-proxy, from the
// Go module proxy into a versioned cache outside the repository, and locates those binaries and
// the upstream manifests a local cluster installs.
package tools

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kueuelab/kueuelab/render"
)

//go:embed patches/*.patch
var patches embed.FS

// method says how a component is built from its module.
type method int

const (
	// wrapperK8s builds a command of k8s.io/kubernetes through a wrapper module that replaces the
	// staging modules (k8s.io/kubernetes' own go.mod points them at ./staging, unusable from the cache).
	wrapperK8s method = iota
	// wrapperModule builds a package through a wrapper module requiring the module (etcd's server
	// module has ../ replaces of its own, so it cannot be the main module).
	wrapperModule
	// goInstall runs `go install pkg@version`.
	goInstall
	// sourceCopy copies the module out of the module cache and builds there (`go install` is
	// refused by the proxy for these: 403 on @v/list), optionally applying a patch first.
	sourceCopy
)

// Component is one binary of the set.
type Component struct {
	Name string // the component's name
	// File is the binary's file name in the set's bin dir (default Name). A component whose
	// build differs from upstream's gets its own file name, so a cache built before the change
	// rebuilds that binary alone.
	File    string
	Module  string
	Version string
	Package string // import path (wrapper, goInstall) or ./relative path inside the source copy
	method  method
	ldflags []string
	patches []string // files under patches/, applied in order with patch -p1 to the source copy
	// main, for wrapperK8s, is the source of the main package built instead of upstream's
	// (written to ./<Name>/main.go of the wrapper module; Package is then "./<Name>").
	main string
}

// FileName is the binary's file name in the set's bin dir.
func (c Component) FileName() string {
	if c.File != "" {
		return c.File
	}
	return c.Name
}

// JobSyncBatchPeriodEnv sets the Job controller's pod-event batch period in kueuelab's
// kube-controller-manager (a Go duration; unset: upstream's 1s).
const JobSyncBatchPeriodEnv = "KUEUELAB_JOB_SYNC_BATCH_PERIOD"

// JobPodFailureBackOffEnv sets the Job controller's pod-failure backoff in kueuelab's
// kube-controller-manager (a Go duration; unset: upstream's 10s, doubling per failure).
const JobPodFailureBackOffEnv = "KUEUELAB_JOB_POD_FAILURE_BACKOFF"

// KueueCycleBackoffEnv caps the backoff of kueuelab's Kueue scheduler after a scheduling cycle that
// admitted nothing (a Go duration; unset: upstream's 1 ms doubling to 10 ms). The patch
// patches/kueue-v0.19.2-cycle-backoff.patch makes Kueue's constant read it.
const KueueCycleBackoffEnv = "KUEUELAB_KUEUE_CYCLE_BACKOFF_MAX"

// kcmMain is upstream's cmd/kube-controller-manager main plus two settings. The Job controller
// waits SyncJobBatchPeriod (1 s, exported for tests) after a pod update before it syncs the Job,
// to coalesce status writes of large Jobs. In a replay at speedup S that second is S trace
// seconds between a Job's last pod finishing and the Job (and its Kueue Workload) finishing,
// during which the Job's quota stays reserved. And it waits DefaultJobPodFailureBackOff (10 s,
// doubling per failure, exported for tests) before it replaces a failed pod of a Job with a
// backoffLimit: wall time the trace clock would stand still for on every injected pod failure.
const kcmMain = `// Command kube-controller-manager is upstream's, with the Job controller's pod-event batch
// period taken from $` + JobSyncBatchPeriodEnv + ` and its pod-failure backoff from
// $` + JobPodFailureBackOffEnv + ` when set.
package main

import (
	"fmt"
	"os"
	"time"
	_ "time/tzdata" // for CronJob Time Zone support

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/pkg/controller/job"
)

func main() {
	for _, s := range []struct {
		env string
		dst *time.Duration
	}{{"` + JobSyncBatchPeriodEnv + `", &job.SyncJobBatchPeriod}, {"` + JobPodFailureBackOffEnv + `", &job.DefaultJobPodFailureBackOff}} {
		v := os.Getenv(s.env)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			fmt.Fprintf(os.Stderr, "%s=%q: want a non-negative Go duration such as 10ms\n", s.env, v)
			os.Exit(2)
		}
		*s.dst = d
	}
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
`

// Set is a named list of components built and used together.
type Set struct {
	Name       string
	Components []Component
}

// Manifest modules of the infrastructure: KWOK's stages and Stage CRD, Kueue's CRDs and webhooks.
const (
	KWOKModule  = "sigs.k8s.io/kwok@" + kwokVersion
	KueueModule = "sigs.k8s.io/kueue@" + KueueVersion
)

// ManifestModules lists the modules `up` reads manifests from (the infrastructure's, and every
// kind's CRD and operator modules); `tools install` downloads them.
func ManifestModules() []string {
	out := []string{KWOKModule, KueueModule}
	add := func(m string) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	reg := render.DefaultRegistry()
	for _, c := range reg.CRDs() {
		add(c.ModuleVersion())
	}
	for _, op := range reg.Operators() {
		add(op.Module + "@" + op.Version)
	}
	return out
}

// The pinned versions of the infrastructure. Kubernetes is the release whose client libraries
// Kueue v0.19.2 is built against (k8s.io/api v0.36.2). etcd stays at 3.5.21: Kubernetes 1.36's API
// server runs on it (kubeadm's own default is 3.6.8, its floor for an external etcd 3.5.24; the
// API server itself checks only the features it uses), and it is one binary less to rebuild.
const (
	k8sVersion   = "v1.36.2"
	etcdVersion  = "v3.5.21"
	kwokVersion  = "v0.7.0"
	KueueVersion = "v0.19.2"
)

// KubernetesVersion is the pinned Kubernetes release of the control plane and a real node.
const KubernetesVersion = k8sVersion

// SetName names the cache directory of the pinned binaries; it records the version of every
// infrastructure component and of the operators there were when the set was made. A component
// added to the set later, or whose build changes (a patch), carries its version and build in its
// file name instead, so that change builds that binary alone and never the others
// (TestAddedComponentsAreAdditive). A new Kubernetes or Kueue release is a new set.
const SetName = "k8s-1.36.2_etcd-3.5.21_kwok-0.7.0_kueue-0.19.2_jobset-0.12.0_to-1.9.3_mpi-0.8.2_trainer-2.2.1_kuberay-1.6.2"

// k8sLDFlags stamp the pinned release into a Kubernetes binary, as upstream's build does
// (`--version`, the version the API server reports and the kubelet registers its node with).
func k8sLDFlags() []string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(k8sVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	return []string{
		"-X k8s.io/component-base/version.gitVersion=" + k8sVersion,
		"-X k8s.io/component-base/version.gitMajor=" + major,
		"-X k8s.io/component-base/version.gitMinor=" + minor,
		"-X k8s.io/component-base/version.gitTreeState=clean",
		"-X k8s.io/client-go/pkg/version.gitVersion=" + k8sVersion,
	}
}

// k8sComponent is the command k8s.io/kubernetes/cmd/<name> of the pinned release, built through
// the Kubernetes wrapper module (k8sWrapperCommands lists the commands it is tidied for).
func k8sComponent(name string) Component {
	return Component{Name: name, Module: "k8s.io/kubernetes", Version: k8sVersion,
		Package: "k8s.io/kubernetes/cmd/" + name, method: wrapperK8s, ldflags: k8sLDFlags()}
}

// Pinned is the version set kueuelab is tested with: the infrastructure and the operator of
// every kind in render's registry.
func Pinned() Set {
	kcm := k8sComponent("kube-controller-manager")
	kcm.File, kcm.Package, kcm.main = "kube-controller-manager-jobbackoff", "./kube-controller-manager", kcmMain
	// kube-scheduler breaks a tie between the best nodes by node name instead of at random, so
	// a replay places pods the same way each time (and as the sim engine's kube-scheduler does).
	sched := k8sComponent("kube-scheduler")
	sched.File, sched.patches = "kube-scheduler-tiebyname", []string{"kubernetes-" + k8sVersion + "-scheduler-tie-by-name.patch"}
	set := Set{
		Name: SetName,
		Components: []Component{
			{Name: "etcd", Module: "go.etcd.io/etcd/server/v3", Version: etcdVersion,
				Package: "go.etcd.io/etcd/server/v3", method: wrapperModule},
			k8sComponent("kube-apiserver"),
			kcm,
			sched,
			{Name: "kwok", Module: "sigs.k8s.io/kwok", Version: kwokVersion,
				Package: "sigs.k8s.io/kwok/cmd/kwok", method: goInstall},
			// Upstream's Kueue with one constant made settable (KueueCycleBackoffEnv), its
			// creation and reservation times kept to the nanosecond (the precise-times patch says
			// why), and its clocks following a replay's trace clock while one runs (the
			// trace-clock patch, runtime/kueueclock); its own file name so the cache keeps other
			// builds and builds this one alone.
			{Name: "kueue", File: "kueue-" + KueueVersion + "-kueuelab13", Module: "sigs.k8s.io/kueue", Version: KueueVersion, Package: "./cmd/kueue",
				method: sourceCopy, patches: []string{"kueue-" + KueueVersion + "-cycle-backoff.patch", "kueue-" + KueueVersion + "-precise-times.patch",
					"kueue-" + KueueVersion + "-trace-clock.patch"},
				ldflags: []string{"-X sigs.k8s.io/kueue/pkg/version.GitVersion=" + KueueVersion}},
		},
	}
	for _, op := range render.DefaultRegistry().Operators() {
		set.Components = append(set.Components, OperatorComponent(op))
	}
	return set
}

// NodeSet is what a real kubelet node runs besides its container runtime: kubelet and kube-proxy
// of the pinned Kubernetes release, built as kube-apiserver is. It is named SetName, so its
// binaries sit in Pinned's directory, beside the API server they join; `tools install` builds them
// only when asked (--real-node), a real node being optional.
func NodeSet() Set {
	return Set{Name: SetName, Components: []Component{k8sComponent("kubelet"), k8sComponent("kube-proxy")}}
}

// OperatorComponent is how an operator of the registry is built.
func OperatorComponent(op *render.Operator) Component {
	c := Component{Name: op.Name, File: op.File, Module: op.Module, Version: op.Version, Package: op.Package,
		method: goInstall, ldflags: op.LDFlags}
	if op.Patch != "" {
		c.patches = []string{op.Patch}
	}
	if op.SourceCopy {
		c.method = sourceCopy
	}
	return c
}

// Names returns the binary names of the set.
func (s Set) Names() []string {
	out := make([]string, len(s.Components))
	for i, c := range s.Components {
		out[i] = c.Name
	}
	return out
}

// CacheDir is kueuelab's cache root: $XDG_CACHE_HOME/kueuelab, else ~/.cache/kueuelab.
func CacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "kueuelab"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "kueuelab"), nil
}

// BinDirEnv names the environment variable pointing at binaries a user already has.
const BinDirEnv = "KUEUELAB_BIN_DIR"

// BinDir resolves where the set's binaries live: the flag value, else $KUEUELAB_BIN_DIR, else the
// versioned cache dir.
func BinDir(flagValue string, set Set) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	if d := os.Getenv(BinDirEnv); d != "" {
		return filepath.Abs(d)
	}
	c, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "bin", set.Name), nil
}

// Locate returns the path of every binary of the set in dir, or an error naming the missing ones.
func Locate(dir string, set Set) (map[string]string, error) {
	out := map[string]string{}
	var missing []string
	for _, c := range set.Components {
		p := filepath.Join(dir, c.FileName())
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, c.Name)
			continue
		}
		out[c.Name] = p
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("binaries missing in %s: %s (run `kueuelab tools install`, or point --bin-dir / $%s at a directory holding them)",
			dir, strings.Join(missing, ", "), BinDirEnv)
	}
	return out, nil
}
