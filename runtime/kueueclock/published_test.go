package kueueclock

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

func TestPublishedRoundTrip(t *testing.T) {
	epoch := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, p := range []Published{
		{Epoch: epoch, Running: true, Position: simclock.Position{Now: 12.5, Base: epoch.Add(3 * time.Second), Rate: 40, Cap: 90}},
		{Epoch: epoch, Running: false, Position: simclock.Position{Now: 7200, Base: epoch.Add(time.Minute), Cap: math.Inf(1)}},
	} {
		got, err := ParsePublished(p.Data())
		if err != nil {
			t.Fatal(err)
		}
		if !got.Epoch.Equal(p.Epoch) || !got.Position.Base.Equal(p.Position.Base) || got.Position.Now != p.Position.Now ||
			got.Position.Rate != p.Position.Rate || got.Position.Cap != p.Position.Cap || got.Running != p.Running {
			t.Errorf("read back %+v, wrote %+v", got, p)
		}
	}
	if got := (Published{Epoch: epoch}).Trace(epoch.Add(90 * time.Second)); got != 90 {
		t.Errorf("Trace: %g, want 90", got)
	}
	d := Published{Epoch: epoch, Position: simclock.Position{Cap: math.Inf(1)}}.Data()
	d[keyRate] = "fast"
	if _, err := ParsePublished(d); err == nil || !strings.Contains(err.Error(), `rate "fast"`) {
		t.Errorf("a bad rate: %v", err)
	}
}
