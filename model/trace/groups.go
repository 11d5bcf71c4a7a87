package trace

import "fmt"

// JobGroups returns, for each job record of w, the index of the pod group it belongs to: the first
// group of its role with equal requests ("1" = "1000m") that has a pod left, in record order, as a
// Reader counts them. It fails when a record matches no group with room.
func (w *Workload) JobGroups(jobs []*Job) ([]int, error) {
	left := make([]int, len(w.Pods))
	for i, p := range w.Pods {
		left[i] = p.Replicas
	}
	out := make([]int, len(jobs))
	for k, j := range jobs {
		out[k] = -1
		for i, p := range w.Pods {
			if left[i] > 0 && p.Role == j.PodRole && SameRequests(p.Requests, j.PodTemplate.Requests) {
				out[k] = i
				left[i]--
				break
			}
		}
		if out[k] < 0 {
			return nil, fmt.Errorf("job %s (role %s, requests %v) matches no pod group of workload %s with a pod left", j.JobID, j.PodRole, j.PodTemplate.Requests, w.WorkloadID)
		}
	}
	return out, nil
}
