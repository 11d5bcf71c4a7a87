package kueuelib

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	_ "sigs.k8s.io/kueue/pkg/features" // registers Kueue's gates in the default gate

	"github.com/kueuelab/kueuelab/runtime/kueuever"
)

// Kueue reads its feature gates from one process-wide gate (features.Enabled), which its main sets
// from the Configuration before anything runs. A sim sets the gates its Kueue runs with for the
// whole run; two sims of one process can run at once only with the same gates.

var (
	gatesMu    sync.Mutex
	gatesSet   map[string]bool
	gatesPrev  map[string]bool
	gatesUsers int
)

// CheckFeatureGates returns an error naming every gate this Kueue does not know.
func CheckFeatureGates(gates map[string]bool) error {
	known := utilfeature.DefaultMutableFeatureGate.GetAll()
	var bad []string
	for g := range gates {
		if _, ok := known[featuregate.Feature(g)]; !ok {
			bad = append(bad, g)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	var hints []string
	for _, g := range bad {
		if h := kueuever.GateHint(g); h != "" {
			hints = append(hints, h)
		}
	}
	msg := fmt.Sprintf("Kueue %s has no feature gate %s", KueueVersion, strings.Join(bad, ", "))
	if len(hints) > 0 {
		msg += " (" + strings.Join(hints, "; ") + ")"
	}
	return errors.New(msg)
}

// SetFeatureGates sets Kueue's gates to gates (the others keep their values) until the last
// release, which sets them back. It fails when another run of this process holds other gates.
func SetFeatureGates(gates map[string]bool) (release func(), err error) {
	if err := CheckFeatureGates(gates); err != nil {
		return nil, err
	}
	gatesMu.Lock()
	defer gatesMu.Unlock()
	if gatesUsers > 0 && !maps.Equal(gatesSet, gates) && (len(gatesSet) > 0 || len(gates) > 0) {
		return nil, fmt.Errorf("feature gates are process-wide in Kueue: a run with gates %v is in progress in this process (asked: %v)", gatesSet, gates)
	}
	if gatesUsers == 0 {
		prev := map[string]bool{}
		for g := range gates {
			prev[g] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(g))
		}
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
			return nil, err
		}
		gatesSet, gatesPrev = maps.Clone(gates), prev
	}
	gatesUsers++
	return func() {
		gatesMu.Lock()
		defer gatesMu.Unlock()
		gatesUsers--
		if gatesUsers == 0 && len(gatesPrev) > 0 {
			// What the gates were before this process's runs set them.
			_ = utilfeature.DefaultMutableFeatureGate.SetFromMap(gatesPrev)
			gatesSet, gatesPrev = nil, nil
		}
	}, nil
}
