package runner

import (
	"context"
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// TestWriteClock: the first write creates the ConfigMap a snapshot reads, later ones update it.
func TestWriteClock(t *testing.T) {
	cs := fake.NewClientset()
	epoch := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, now := range []float64{10, 250} {
		p := kueueclock.Published{Epoch: epoch, Running: now < 100, Position: simclock.Position{Now: now, Base: epoch.Add(time.Second), Cap: math.Inf(1)}}
		if err := writeClock(context.Background(), cs, p); err != nil {
			t.Fatal(err)
		}
		cm, err := cs.CoreV1().ConfigMaps(kueueclock.PublishedNamespace).Get(context.Background(), kueueclock.PublishedName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := kueueclock.ParsePublished(cm.Data)
		if err != nil {
			t.Fatal(err)
		}
		if got.Position.Now != now || got.Running != p.Running {
			t.Errorf("published %+v, wrote %+v", got, p)
		}
	}
}
