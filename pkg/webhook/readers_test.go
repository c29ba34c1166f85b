package webhook

import (
	"context"
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// TestJobsReadTheLiveJob: the reader behind template seals returns a Job's
// UID and its pod template's seal, says "not found" for a Job that does not
// exist and for kinds other than Job, and returns the API server's other
// errors as errors, never as "not found".
func TestJobsReadTheLiveJob(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "uid-1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{record.AnnotationMAC: "v2:k:m"}}}}}
	r := jobs{api: fake.NewClientBuilder().WithScheme(scheme).WithObjects(job).Build()}
	ctx := context.Background()

	uid, ann, found, err := r.PodTemplateOf(ctx, "team-a", "Job", "train")
	if err != nil || !found || uid != "uid-1" || ann[record.AnnotationMAC] != "v2:k:m" {
		t.Errorf("the live Job: uid %q, annotations %v, found %v, err %v", uid, ann, found, err)
	}
	for name, key := range map[string][3]string{
		"another namespace": {"team-b", "Job", "train"},
		"another name":      {"team-a", "Job", "other"},
		"another kind":      {"team-a", "JobSet", "train"},
	} {
		if _, _, found, err := r.PodTemplateOf(ctx, key[0], key[1], key[2]); found || err != nil {
			t.Errorf("%s: found %v, err %v; want not found", name, found, err)
		}
	}

	failing := jobs{api: fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("connection refused")
		}}).Build()}
	if _, _, found, err := failing.PodTemplateOf(ctx, "team-a", "Job", "train"); err == nil || found {
		t.Errorf("an API error: found %v, err %v; want the error", found, err)
	}
}
