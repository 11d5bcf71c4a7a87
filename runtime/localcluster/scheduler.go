package localcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	kschedv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
)

// schedulerConfigFile is the local kube-scheduler's configuration, in the state dir's config/.
const schedulerConfigFile = "kube-scheduler.yaml"

// schedulerBackoffSec is the local kube-scheduler's pod backoff, initial and maximum (upstream 1 s
// and 10 s). A pod the scheduler rejected is retried when the cluster changes (a pod finishing
// frees its node), but not before its backoff since the last attempt has passed, and that
// backoff is wall time: at speedup 1000 upstream's 10 s would be 2.8 trace hours in which a pod
// that now fits waits with its quota held. One second is the least the API allows (whole
// seconds, initial > 0, max ≥ initial).
const schedulerBackoffSec = 1

// schedulerConfig completes user (nil: upstream's defaults) with what the local cluster needs:
// its kubeconfig and client rate, no leader election, and the backoff above. It returns the
// configuration file and a line per setting of user's it replaced.
func (s *State) schedulerConfig(user *kschedv1.KubeSchedulerConfiguration) ([]byte, []string, error) {
	c := &kschedv1.KubeSchedulerConfiguration{}
	if user != nil {
		c = user.DeepCopy()
	}
	var replaced []string
	for _, b := range []struct {
		name string
		v    **int64
	}{{"podInitialBackoffSeconds", &c.PodInitialBackoffSeconds}, {"podMaxBackoffSeconds", &c.PodMaxBackoffSeconds}} {
		if *b.v != nil && **b.v != schedulerBackoffSec {
			replaced = append(replaced, fmt.Sprintf("%s %d replaced by %d: a wall-time backoff costs speedup times as much trace time", b.name, **b.v, schedulerBackoffSec))
		}
		*b.v = ptr.To[int64](schedulerBackoffSec)
	}
	c.ClientConnection.Kubeconfig = s.Kubeconfig()
	c.ClientConnection.QPS = clientQPS
	c.ClientConnection.Burst = clientQPS
	c.LeaderElection.LeaderElect = ptr.To(false)
	data, err := rcluster.MarshalKubeSchedulerConfiguration(c)
	return data, replaced, err
}

// applySchedulerConfig writes the scheduler's configuration file when it differs from the one
// there, after the real kube-scheduler has accepted it, and returns the file's digest. The
// scheduler reads the file only when it starts: Up asks the supervisor for the scheduler with
// the digest, and the supervisor restarts a scheduler that started with another one. user nil
// keeps the file there, or writes upstream's defaults when there is none.
func (u *upper) applySchedulerConfig(ctx context.Context, user *kschedv1.KubeSchedulerConfiguration) (string, error) {
	path := u.s.path("config", schedulerConfigFile)
	old, err := os.ReadFile(path)
	if user == nil && err == nil {
		return configDigest(old), nil
	}
	data, replaced, err := u.s.schedulerConfig(user)
	if err != nil {
		return "", err
	}
	for _, r := range replaced {
		fmt.Fprintf(u.out, "  %-24s %s\n", Scheduler, r)
	}
	if bytes.Equal(old, data) {
		return configDigest(data), nil
	}
	if _, err := ValidateSchedulerConfig(ctx, u.specs[Scheduler].bin, data); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	return configDigest(data), nil
}

// configDigest names a configuration file's content in desired.json and status.json.
func configDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// ValidateSchedulerConfig has the kube-scheduler binary at bin load config (its own strict
// decoding, defaulting, validation and plugin construction, without serving or reaching the
// API server) and returns the configuration it completed, every default and plugin filled in.
// The kubeconfig config names must exist.
func ValidateSchedulerConfig(ctx context.Context, bin string, config []byte) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kueuelab-kube-scheduler-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "completed.yaml")
	if err := os.WriteFile(in, config, 0o600); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--config="+in, "--write-config-to="+out, "--secure-port=0")
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	runErr := cmd.Run()
	completed, err := os.ReadFile(out)
	if runErr != nil || err != nil {
		return nil, fmt.Errorf("kube-scheduler refuses the configuration: %s", schedulerFailure(stderr.String(), errors.Join(runErr, err)))
	}
	return completed, nil
}

// schedulerFailure is the reason in kube-scheduler's "command failed" log line, else err.
func schedulerFailure(log string, err error) string {
	for _, line := range strings.Split(log, "\n") {
		if _, after, ok := strings.Cut(line, `"command failed" err=`); ok {
			return strings.Trim(after, `"`)
		}
	}
	return err.Error()
}
