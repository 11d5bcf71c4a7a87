package render

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Job records may carry a Kubernetes affinity (Joulie's workloadgen writes node affinity on its
// own joulie.io/power-profile label). Such a hint is rendered only where the cluster can honour
// it: node-selector expressions on label keys the cluster's nodes carry. An expression on any
// other key could never match and would leave the pod unschedulable, so it is dropped, and said
// once per key; a term left empty goes with it. Pod affinity and anti-affinity are not rendered.

// nodeAffinity reads a job record's affinity and keeps what the cluster's nodes can satisfy.
func (b *build) nodeAffinity(raw json.RawMessage) (*corev1.Affinity, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var a corev1.Affinity
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("podTemplate.affinity: %w", err)
	}
	if a.PodAffinity != nil || a.PodAntiAffinity != nil {
		b.o.Warn("trace affinity: podAffinity and podAntiAffinity are not rendered (only node affinity is)")
	}
	na := a.NodeAffinity
	if na == nil {
		return nil, nil
	}
	out := &corev1.NodeAffinity{}
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		var terms []corev1.NodeSelectorTerm
		for _, t := range req.NodeSelectorTerms {
			if t, ok := b.knownTerm(t); ok {
				terms = append(terms, t)
			}
		}
		// A required selector with no term left would match no node: leave the requirement out.
		if len(terms) > 0 {
			out.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
		}
	}
	for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		if t, ok := b.knownTerm(p.Preference); ok {
			out.PreferredDuringSchedulingIgnoredDuringExecution = append(out.PreferredDuringSchedulingIgnoredDuringExecution,
				corev1.PreferredSchedulingTerm{Weight: p.Weight, Preference: t})
		}
	}
	if out.RequiredDuringSchedulingIgnoredDuringExecution == nil && out.PreferredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, nil
	}
	return &corev1.Affinity{NodeAffinity: out}, nil
}

// knownTerm keeps the expressions of a term on labels the cluster's nodes carry; ok is false when
// none is left.
func (b *build) knownTerm(t corev1.NodeSelectorTerm) (corev1.NodeSelectorTerm, bool) {
	var out corev1.NodeSelectorTerm
	for _, e := range t.MatchExpressions {
		if b.p.NodeLabelKeys[e.Key] {
			out.MatchExpressions = append(out.MatchExpressions, e)
			continue
		}
		b.o.Warn(fmt.Sprintf("trace node affinity on label %q: no node of the cluster carries it; the hint is dropped", e.Key))
	}
	if len(t.MatchFields) > 0 {
		b.o.Warn("trace node affinity: matchFields (node names) are not rendered")
	}
	return out, len(out.MatchExpressions) > 0
}
