package render

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/trace"
)

// Result is one workload rendered by RenderAll.
type Result struct {
	// Index is the workload's position in the input (submit order).
	Index    int
	Workload *trace.Workload
	Objects  []client.Object
	// Manifest is Objects encoded in the requested format, documents separated as Encoder does.
	Manifest []byte
	// Err says why the workload could not be placed, rendered, checked or encoded; it names the
	// workload id.
	Err error
}

// Check inspects a rendered object (schema validation); nil accepts everything.
type Check func(client.Object) error

// RenderAll places, renders, checks and encodes ws on workers goroutines and calls emit with the
// results in input order. A failed workload is passed to emit with Err set; emit decides whether
// to go on (return nil) or stop (return an error, which RenderAll returns).
func (r *Renderer) RenderAll(ctx context.Context, ws []*trace.Workload, jobs map[string][]*trace.Job, placer Placer, check Check, format Format, workers int, emit func(Result) error) error {
	if workers < 1 {
		workers = 1
	}
	const batch = 256
	results := make([]Result, batch)
	for start := 0; start < len(ws); start += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(batch, len(ws)-start)
		var wg sync.WaitGroup
		next := make(chan int, n)
		for i := range n {
			next <- i
		}
		close(next)
		for range min(workers, n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					results[i] = r.one(start+i, ws[start+i], jobs, placer, check, format)
				}
			}()
		}
		wg.Wait()
		for i := range n {
			if err := emit(results[i]); err != nil {
				return err
			}
			results[i] = Result{}
		}
	}
	return nil
}

func (r *Renderer) one(i int, w *trace.Workload, jobs map[string][]*trace.Job, placer Placer, check Check, format Format) Result {
	res := Result{Index: i, Workload: w}
	p, err := placer.Place(w)
	if err != nil {
		if !strings.Contains(err.Error(), w.WorkloadID) {
			err = fmt.Errorf("workload %s: %w", w.WorkloadID, err)
		}
		res.Err = err
		return res
	}
	objs, err := r.Render(w, jobs[w.WorkloadID], p)
	if err != nil {
		res.Err = err
		return res
	}
	var buf bytes.Buffer
	for k, o := range objs {
		if check != nil {
			if err := check(o); err != nil {
				res.Err = fmt.Errorf("workload %s: invalid %s: %w", w.WorkloadID, o.GetObjectKind().GroupVersionKind().Kind, err)
				return res
			}
		}
		b, err := Marshal(o, format)
		if err != nil {
			res.Err = fmt.Errorf("workload %s: %w", w.WorkloadID, err)
			return res
		}
		if k > 0 && format == YAML {
			buf.WriteString("---\n")
		}
		buf.Write(b)
		if format == JSON {
			buf.WriteByte('\n')
		}
	}
	res.Objects, res.Manifest = objs, buf.Bytes()
	return res
}
