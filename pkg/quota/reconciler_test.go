package quota

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// fixed is a Declarations that always answers the same.
type fixed struct {
	decls []Declaration
	rev   string
}

func (f fixed) Quotas() ([]Declaration, string) { return f.decls, f.rev }

// owned is gpuadmit's quota in team-a as an earlier revision left it.
func owned() *corev1.ResourceQuota {
	q := desired("team-a", Declaration{}, "old")
	q.Spec.Hard = corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("2")}
	return q
}

func TestReconcileQuota(t *testing.T) {
	four := int64(4)
	teamA := []Declaration{{Namespaces: []string{"team-a"}, WholeGPUs: &four}}
	tests := map[string]struct {
		decls Declarations
		want  map[string]string // team-a's gpuadmit quota, hard by resource; nil: none
	}{
		"no active policy set leaves the quota as it is": {
			decls: fixed{},
			want:  map[string]string{"requests.nvidia.com/gpu": "2"},
		},
		"a revision without a declaration for the namespace deletes it": {
			decls: fixed{rev: "abc"},
		},
		"a revision with a declaration updates it": {
			decls: fixed{decls: teamA, rev: "abc"},
			want:  map[string]string{"requests.nvidia.com/gpu": "4"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ns := &corev1.Namespace{}
			ns.Name = "team-a"
			c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(ns, owned()).Build()
			r := NewReconciler(c, tt.decls, events.NewFakeRecorder(10))
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "team-a"}}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, hardOf(t, c)); diff != "" {
				t.Errorf("team-a's gpuadmit quota (-want +got):\n%s", diff)
			}
		})
	}
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// hardOf reads team-a's gpuadmit quota's spec.hard, nil when there is none.
func hardOf(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	q := &corev1.ResourceQuota{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: Name}, q)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err != nil {
		return nil
	}
	got := map[string]string{}
	for r, v := range q.Spec.Hard {
		got[string(r)] = v.String()
	}
	return got
}
