package contract

import (
	"testing"

	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"
)

// TestKueueLabels checks the copies of Kueue's label keys against the Kueue module in go.mod.
func TestKueueLabels(t *testing.T) {
	for _, c := range []struct{ name, ours, kueues string }{
		{"QueueLabel", KueueQueueLabel, kueueconstants.QueueLabel},
		{"WorkloadPriorityClassLabel", KueuePriorityClassLabel, kueueconstants.WorkloadPriorityClassLabel},
	} {
		if c.ours != c.kueues {
			t.Errorf("Kueue's constants.%s is %q, render/contract has %q", c.name, c.kueues, c.ours)
		}
	}
}
