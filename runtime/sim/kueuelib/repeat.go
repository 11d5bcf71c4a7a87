package kueuelib

import (
	"fmt"
	"strings"
)

// HeadsState describes what a scheduling cycle takes and what Kueue keeps of it outside the API:
// each ClusterQueue's head and the flavor assigner's progress on it (LastAssignment: the flavors
// tried, which the next try resumes after, and the ClusterQueue generation they were tried at).
// A cycle that writes nothing and leaves this the same left Kueue's scheduler where it found it.
func (k *Kueue) HeadsState() string {
	var b strings.Builder
	for i, keys := range k.heads.keys {
		if len(*keys) == 0 {
			continue
		}
		key := (*keys)[0]
		fmt.Fprintf(&b, "%s:%s", k.heads.names[i], key)
		if info := k.heads.cqs[i].Info(key); info != nil && info.LastAssignment != nil {
			fmt.Fprintf(&b, "%v@%d", info.LastAssignment.LastTriedFlavorIdx, info.LastAssignment.ClusterQueueGeneration)
		}
		b.WriteByte(';')
	}
	return b.String()
}
