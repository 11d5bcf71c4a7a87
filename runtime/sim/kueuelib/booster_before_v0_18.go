//go:build kueue_v0_15 || kueue_v0_17

package kueuelib

import (
	"fmt"
	"time"
)

// parseBooster refuses the booster: it ships with Kueue v0.18 and later.
func parseBooster(map[string]any) (struct{}, error) {
	return struct{}{}, fmt.Errorf("priorityBooster: Kueue's kueue-priority-booster and its PriorityBoost gate ship with Kueue v0.18 and later; this sim runs %s", KueueVersion)
}

func (k *Kueue) newBooster(doc map[string]any) (boosterReconciler, time.Duration, error) {
	_, err := parseBooster(doc)
	return nil, 0, err
}
