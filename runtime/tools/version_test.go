package tools

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// TestSimAndClusterRunOneKueue: the Kueue the cluster engine builds (the pinned set's kueue and the
// manifests it installs), the Kueue whose packages the sim engine links (go.mod's, as the binary
// records it) and the version the sim's seams were checked against are one version.
func TestSimAndClusterRunOneKueue(t *testing.T) {
	// The module graph's Kueue, as the go command resolves it (a test binary records no
	// dependency versions of its own).
	out, err := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/kueue: %v", err)
	}
	linked := strings.TrimSpace(string(out))
	var built string
	for _, c := range Pinned().Components {
		if c.Name == "kueue" {
			built = c.Version
		}
	}
	_, manifests, _ := strings.Cut(KueueModule, "@")
	if linked == "" || linked != built || built != manifests || built != kueuelib.KueueVersion {
		t.Errorf("sim links Kueue %q (seams checked on %s); the cluster engine builds %q and installs %q's manifests",
			linked, kueuelib.KueueVersion, built, manifests)
	}
}
