package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestCacheObjectsCountsEachKind: gpuadmit_cache_objects follows an
// informer's adds and deletes, and drops the informer when its Run ends.
func TestCacheObjectsCountsEachKind(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-0"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}},
	)
	counts := &objectCounts{counts: map[*kindCount]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (k8sruntime.Object, error) {
			return cs.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	// The fake clientset serves no watch-list stream: list, then watch.
	inf := counts.newInformer(ctx)(toolscache.ToListWatcherWithWatchListSemantics(lw, cs), &corev1.Node{}, 0, toolscache.Indexers{})
	go inf.Run(ctx.Done())
	syncCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	wantCount(t, counts, 2)
	if err := cs.CoreV1().Nodes().Delete(ctx, "gpu-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantCount(t, counts, 1)
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for testutil.CollectAndCount(counts) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the informer of an ended Run is still counted")
		}
		time.Sleep(time.Millisecond)
	}
}

func wantCount(t *testing.T, counts *objectCounts, want int) {
	t.Helper()
	text := fmt.Sprintf(`# HELP gpuadmit_cache_objects %s
# TYPE gpuadmit_cache_objects gauge
gpuadmit_cache_objects{kind="Node"} %d
`, cacheObjectsHelp, want)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := testutil.CollectAndCompare(counts, strings.NewReader(text))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}
