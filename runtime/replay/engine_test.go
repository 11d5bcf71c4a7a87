package replay

import (
	"testing"

	"github.com/kueuelab/kueuelab/runtime/results"
)

func TestRequireNamesTheEngineThatHasIt(t *testing.T) {
	for _, c := range []Capability{Faults, KueueTimers, Outages, RemoteCluster} {
		if err := Require(results.EngineCluster, c); err != nil {
			t.Errorf("cluster engine lacks %s: %v", c, err)
		}
		err := Require(results.EngineSim, c)
		if c == KueueTimers {
			if err != nil {
				t.Errorf("sim engine lacks %s: %v", c, err)
			}
			continue
		}
		if err == nil || err.Error() != "the sim engine does not model "+string(c)+": use the cluster engine" {
			t.Errorf("sim engine, %s: %v", c, err)
		}
	}
}
