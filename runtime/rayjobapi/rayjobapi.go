// Package rayjobapi plays the one part of a Ray head that KubeRay's RayJob controller cannot do
// without: the dashboard's job API (GET /api/jobs/<id>), which decides when a RayJob has ended.
// On KWOK the head pod is fake, so the answer is read from the Kubernetes objects instead: in
// K8sJobMode a RayJob's submitter Job runs `ray job submit`, which exits 0 exactly when the Ray
// job SUCCEEDED and non-zero when it FAILED, so the Ray job's status is the submitter's. The
// local cluster points KubeRay's plain-HTTP requests (which only go to Ray dashboards) here as an
// HTTP proxy; the request's host names the head service, and so the namespace.
//
// RayJobs in HTTPMode, InteractiveMode or SidecarMode have no submitter Job whose end kueuelab
// simulates: they are reported RUNNING until activeDeadlineSeconds ends them.
package rayjobapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// jobIDIndex indexes RayJobs by status.jobId, the id KubeRay asks about.
const jobIDIndex = "status.jobId"

// JobInfo is the part of Ray's JobDetails that KubeRay reads (utils/types.RayJobInfo).
type JobInfo struct {
	JobID        string          `json:"job_id"`
	SubmissionID string          `json:"submission_id"`
	Status       rayv1.JobStatus `json:"status"`
	Entrypoint   string          `json:"entrypoint"`
	Message      string          `json:"message,omitempty"`
	StartTime    uint64          `json:"start_time,omitempty"`
	EndTime      uint64          `json:"end_time,omitempty"`
}

// Serve answers Ray job API requests on addr from the objects of the cluster at kubeconfig until
// ctx ends.
func Serve(ctx context.Context, kubeconfig, addr string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{rayv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := c.IndexField(ctx, &rayv1.RayJob{}, jobIDIndex, func(o client.Object) []string {
		if id := o.(*rayv1.RayJob).Status.JobId; id != "" {
			return []string{id}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index RayJobs: %w", err)
	}
	for _, o := range []client.Object{&rayv1.RayJob{}, &batchv1.Job{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return fmt.Errorf("watch %T: %w", o, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Start(cctx) }() // returns when cctx ends; a failure shows as a sync timeout
	syncCtx, cancelSync := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelSync()
	if !c.WaitForCacheSync(syncCtx) {
		return errors.New("caches did not sync")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: Handler(c), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler serves the Ray job API from r, which must index RayJobs by jobIDIndex.
func Handler(r client.Reader) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /api/jobs/{id}", func(w http.ResponseWriter, req *http.Request) {
		info, err := jobInfo(req.Context(), r, namespaceOf(req.Host), req.PathValue("id"))
		switch {
		case errors.Is(err, errNotFound):
			http.Error(w, err.Error(), http.StatusNotFound) // KubeRay reads 404 as "no such job"
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			writeJSON(w, info)
		}
	})
	mux.HandleFunc("GET /api/jobs/{$}", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, []JobInfo{}) })
	// HTTPMode submits through the API: accept, the job is the RayJob's own.
	mux.HandleFunc("POST /api/jobs/{$}", func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			SubmissionID string `json:"submission_id"`
		}
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]string{"job_id": body.SubmissionID, "submission_id": body.SubmissionID})
	})
	mux.HandleFunc("POST /api/jobs/{id}/stop", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, map[string]bool{"stopped": true}) })
	mux.HandleFunc("DELETE /api/jobs/{id}", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, map[string]bool{"deleted": true}) })
	mux.HandleFunc("GET /api/jobs/{id}/logs", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, map[string]string{"logs": ""}) })
	return mux
}

var errNotFound = errors.New("no such Ray job")

// namespaceOf reads the namespace out of a head service's host, <service>.<namespace>.svc...:port.
func namespaceOf(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	parts := strings.Split(host, ".")
	if len(parts) >= 3 && parts[2] == "svc" {
		return parts[1]
	}
	return ""
}

// jobInfo is the status of the Ray job id of a RayJob in namespace ns ("" for any).
func jobInfo(ctx context.Context, r client.Reader, ns, id string) (*JobInfo, error) {
	var list rayv1.RayJobList
	opts := []client.ListOption{client.MatchingFields{jobIDIndex: id}}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("%w %q in namespace %q", errNotFound, id, ns)
	}
	rj := &list.Items[0]
	info := &JobInfo{JobID: id, SubmissionID: id, Entrypoint: rj.Spec.Entrypoint, Status: rayv1.JobStatusRunning}
	if st := rj.Status.StartTime; st != nil {
		info.StartTime = uint64(st.UnixMilli())
	}
	if rj.Spec.SubmissionMode != rayv1.K8sJobMode && rj.Spec.SubmissionMode != "" {
		info.Message = fmt.Sprintf("kueuelab: a %s RayJob has no submitter Job to end it on KWOK; it runs until activeDeadlineSeconds", rj.Spec.SubmissionMode)
		return info, nil
	}
	var job batchv1.Job
	if err := r.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: rj.Name}, &job); err != nil {
		if client.IgnoreNotFound(err) == nil {
			info.Status = rayv1.JobStatusPending // KubeRay submits once the cluster is ready
			return info, nil
		}
		return nil, err
	}
	if !ownedBy(&job, rj) {
		return info, nil
	}
	if t := job.Status.StartTime; t != nil {
		info.StartTime = uint64(t.UnixMilli())
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			info.Status, info.Message = rayv1.JobStatusSucceeded, "the submitter exited 0"
		case batchv1.JobFailed:
			info.Status, info.Message = rayv1.JobStatusFailed, "the submitter failed: "+c.Reason
		default:
			continue
		}
		info.EndTime = uint64(c.LastTransitionTime.UnixMilli())
	}
	return info, nil
}

func ownedBy(job *batchv1.Job, rj *rayv1.RayJob) bool {
	for _, ref := range job.OwnerReferences {
		if ref.UID == rj.UID {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
