package runner

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// clockPeriod is how often the published trace clock is rewritten while it moves: a reader takes
// the position and its rate, so between writes it can extrapolate up to the next alarm.
const clockPeriod = time.Second

// publishClock keeps the replay's trace clock in the ConfigMap kueueclock.PublishedName while ctx
// lasts (a write when the position changed, at most every clockPeriod). At the end it leaves the
// position the clock stopped at, marked not running, when the replay's objects stay (keep): their
// times are on that clock; otherwise it deletes the ConfigMap, so that a later reader takes
// Kueue's times, back on wall time, as wall times. Failures are not the replay's: a reader then
// finds no clock or an older one, and says so.
func publishClock(ctx context.Context, cs kubernetes.Interface, clk *simclock.Clock, epoch time.Time, keep bool) {
	var last simclock.Position
	write := func(ctx context.Context, running bool) {
		p := clk.Position()
		if running && p == last {
			return
		}
		last = p
		_ = writeClock(ctx, cs, kueueclock.Published{Epoch: epoch, Position: p, Running: running})
	}
	tick := time.NewTicker(clockPeriod)
	defer tick.Stop()
	write(ctx, true)
	for {
		select {
		case <-ctx.Done():
			end, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if keep {
				write(end, false)
			} else {
				_ = cs.CoreV1().ConfigMaps(kueueclock.PublishedNamespace).Delete(end, kueueclock.PublishedName, metav1.DeleteOptions{})
			}
			cancel()
			return
		case <-tick.C:
			write(ctx, true)
		}
	}
}

func writeClock(ctx context.Context, cs kubernetes.Interface, p kueueclock.Published) error {
	cms := cs.CoreV1().ConfigMaps(kueueclock.PublishedNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kueueclock.PublishedNamespace, Name: kueueclock.PublishedName}, Data: p.Data()}
	_, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	return err
}
