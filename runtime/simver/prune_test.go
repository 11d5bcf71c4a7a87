package simver

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/kueuever"
)

// TestPruneStale removes the sims of a source tree that is gone and keeps those of one that
// exists.
func TestPruneStale(t *testing.T) {
	sims := t.TempDir()
	live := t.TempDir()
	if err := os.WriteFile(filepath.Join(live, "go.mod"), []byte("module "+Module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "deleted-clone")
	v := kueuever.MustLookup("v0.18.3")
	for name, src := range map[string]string{"live": live, "gone": gone} {
		w := filepath.Join(sims, name, "kueue-"+v.Name)
		if err := os.MkdirAll(w, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(w, "go.mod"), wrapperMod(src, v, ""), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	PruneStale(sims, &log)
	if _, err := os.Stat(filepath.Join(sims, "gone")); !os.IsNotExist(err) {
		t.Errorf("the sims of a gone source tree stay: %v", err)
	}
	if _, err := os.Stat(filepath.Join(sims, "live")); err != nil {
		t.Errorf("the sims of a live source tree went: %v", err)
	}
	if !bytes.Contains(log.Bytes(), []byte("removed the sims of "+gone)) {
		t.Errorf("log %q does not name what went", log.String())
	}
}
