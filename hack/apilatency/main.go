// Command apilatency measures the round trip of sequential writes to a cluster's API server, the
// control-plane model's write latency: it creates a ConfigMap and patches it -n times, one after
// the other, with no client-side rate limit, and prints the mean, median and 90th percentile.
//
//	go run ./hack/apilatency --kubeconfig "$(kueuelab cluster kubeconfig)" -n 500
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kueuelab/kueuelab/runtime/cluster"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	n := flag.Int("n", 500, "writes")
	flag.Parse()
	cfg, err := cluster.RESTConfig(*kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the server's round trip alone
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("apilatency-%d", time.Now().UnixNano()), Namespace: "default"}}
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = c.CoreV1().ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{}) }()
	var d []time.Duration
	for i := 0; i < *n; i++ {
		patch := fmt.Sprintf(`{"data":{"i":"%d"}}`, i)
		t0 := time.Now()
		if _, err := c.CoreV1().ConfigMaps("default").Patch(ctx, cm.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			log.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	fmt.Printf("%d sequential PATCHes: mean %s, median %s, p90 %s\n", len(d), (sum / time.Duration(len(d))).Round(10*time.Microsecond),
		d[len(d)/2].Round(10*time.Microsecond), d[len(d)*9/10].Round(10*time.Microsecond))
}
