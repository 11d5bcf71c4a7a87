package rayjobapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

func rayJob(ns, name, jobID string, mode rayv1.JobSubmissionMode) *rayv1.RayJob {
	return &rayv1.RayJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-rj-" + name)},
		Spec:       rayv1.RayJobSpec{Entrypoint: "python train.py", SubmissionMode: mode},
		Status:     rayv1.RayJobStatus{JobId: jobID},
	}
}

func submitter(rj *rayv1.RayJob, cond batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: rj.Namespace, Name: rj.Name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: rj.Name, UID: rj.UID}}}}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded",
			LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0))}}
	}
	return j
}

// proxyClient sends requests to srv as to an HTTP proxy, the way KubeRay's dashboard client
// reaches the stand-in through $HTTP_PROXY.
func proxyClient(t *testing.T, srv *httptest.Server) *http.Client {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}, Timeout: 5 * time.Second}
}

func TestJobStatusFollowsTheSubmitter(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{rayv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	running := rayJob("team-a", "running", "running-abc", rayv1.K8sJobMode)
	done := rayJob("team-a", "done", "done-abc", rayv1.K8sJobMode)
	failed := rayJob("team-b", "failed", "failed-abc", rayv1.K8sJobMode)
	waiting := rayJob("team-a", "waiting", "waiting-abc", rayv1.K8sJobMode)
	httpMode := rayJob("team-a", "http", "http-abc", rayv1.HTTPMode)
	foreign := rayJob("team-a", "foreign", "foreign-abc", rayv1.K8sJobMode)
	notOwned := submitter(foreign, batchv1.JobComplete)
	notOwned.OwnerReferences = nil
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&rayv1.RayJob{}, jobIDIndex, func(o client.Object) []string { return []string{o.(*rayv1.RayJob).Status.JobId} }).
		WithObjects(running, done, failed, waiting, httpMode, foreign,
			submitter(running, ""), submitter(done, batchv1.JobComplete), submitter(failed, batchv1.JobFailed), notOwned).
		Build()
	srv := httptest.NewServer(Handler(c))
	defer srv.Close()
	cl := proxyClient(t, srv)

	tests := []struct {
		host, id string
		code     int
		status   rayv1.JobStatus
	}{
		{"running-raycluster-head-svc.team-a.svc.cluster.local:8265", "running-abc", 200, rayv1.JobStatusRunning},
		{"done-raycluster-head-svc.team-a.svc.cluster.local:8265", "done-abc", 200, rayv1.JobStatusSucceeded},
		{"failed-raycluster-head-svc.team-b.svc.cluster.local:8265", "failed-abc", 200, rayv1.JobStatusFailed},
		{"waiting-raycluster-head-svc.team-a.svc.cluster.local:8265", "waiting-abc", 200, rayv1.JobStatusPending},
		{"http-raycluster-head-svc.team-a.svc.cluster.local:8265", "http-abc", 200, rayv1.JobStatusRunning},
		{"foreign-raycluster-head-svc.team-a.svc.cluster.local:8265", "foreign-abc", 200, rayv1.JobStatusRunning},
		// The namespace comes from the head service's host: another namespace's job is unknown.
		{"failed-raycluster-head-svc.team-a.svc.cluster.local:8265", "failed-abc", 404, ""},
		{"x-head-svc.team-a.svc.cluster.local:8265", "nope", 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.id+"@"+tc.host, func(t *testing.T) {
			resp, err := cl.Get(fmt.Sprintf("http://%s/api/jobs/%s", tc.host, tc.id))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.code != 200 {
				return
			}
			var info JobInfo
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
				t.Fatal(err)
			}
			if info.Status != tc.status || info.JobID != tc.id {
				t.Errorf("job %+v, want status %s", info, tc.status)
			}
			terminal := tc.status == rayv1.JobStatusSucceeded || tc.status == rayv1.JobStatusFailed
			if terminal != (info.EndTime > 0) {
				t.Errorf("end time %d for status %s", info.EndTime, info.Status)
			}
		})
	}
}

// TestServesThroughTheProxyProtocol runs Serve's handler behind a real listener and sends it an
// absolute-form request line, as Go's transport does to an HTTP proxy.
func TestServesThroughTheProxyProtocol(t *testing.T) {
	srv := httptest.NewServer(Handler(fake.NewClientBuilder().Build()))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST http://h-head-svc.ns.svc.cluster.local:8265/api/jobs/ HTTP/1.1\r\nHost: h-head-svc.ns.svc.cluster.local:8265\r\nContent-Type: application/json\r\nContent-Length: 25\r\n\r\n{\"submission_id\":\"s-123\"}")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || got["job_id"] != "s-123" {
		t.Fatalf("status %d body %v (%v), want job_id s-123", resp.StatusCode, got, err)
	}
}
