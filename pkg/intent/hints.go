package intent

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// backends are the values gpuadmit.io/backend accepts.
var backends = []Backend{BackendMIG, BackendShared, BackendWhole, BackendTimeSliced}

// readHints reads the pod-level hints into an otherwise empty Pod.
func readHints(meta *metav1.ObjectMeta) (Pod, field.ErrorList) {
	var p Pod
	var errs, errs2, errs3 field.ErrorList
	p.Class, errs = readClass(meta)
	p.Backend, errs2 = readBackend(meta.Annotations)
	p.Model, errs3 = readModel(meta.Annotations)
	errs = append(append(errs, errs2...), errs3...)
	return p, append(errs, readForeign(meta.Annotations, &p)...)
}

// readClass reads gpuadmit.io/class from the label or the annotation, which
// must agree when both are set.
func readClass(meta *metav1.ObjectMeta) (string, field.ErrorList) {
	label, inLabel := meta.Labels[LabelClass]
	ann, inAnn := meta.Annotations[AnnotationClass]
	path := field.NewPath("metadata", "labels").Key(LabelClass)
	switch {
	case inLabel && inAnn && label != ann:
		return "", field.ErrorList{field.Invalid(annotations.Key(AnnotationClass), ann, fmt.Sprintf(
			"the label %s is %q but the annotation says %q; set one, or both to the same value", LabelClass, label, ann))}
	case !inLabel && !inAnn:
		return "", nil
	case !inLabel:
		label, path = ann, annotations.Key(AnnotationClass)
	}
	if msgs := content.IsDNS1123Label(label); len(msgs) > 0 {
		return "", field.ErrorList{field.Invalid(path, label, fmt.Sprintf(
			"%s; accepted: a DNS-1123 label such as training, inference or batch", strings.Join(msgs, "; ")))}
	}
	return label, nil
}

// readBackend reads gpuadmit.io/backend.
func readBackend(ann map[string]string) (Backend, field.ErrorList) {
	v, ok := ann[AnnotationBackend]
	switch {
	case !ok:
		return BackendAny, nil
	case v == "" || !slices.Contains(backends, Backend(v)):
		return BackendAny, field.ErrorList{field.NotSupported(annotations.Key(AnnotationBackend), v, backends)}
	}
	return Backend(v), nil
}

// readModel reads gpuadmit.io/model, a catalog model name such as H100-SXM5-80GB.
func readModel(ann map[string]string) (string, field.ErrorList) {
	v, ok := ann[AnnotationModel]
	path := annotations.Key(AnnotationModel)
	switch {
	case !ok:
		return "", nil
	case v == "":
		return "", field.ErrorList{field.Required(path, "name a GPU model of the catalog, or remove the annotation")}
	}
	if msgs := content.IsLabelValue(v); len(msgs) > 0 {
		return "", field.ErrorList{field.Invalid(path, v, fmt.Sprintf(
			"%s; accepted: a GPU model of the catalog, written as a label value", strings.Join(msgs, "; ")))}
	}
	return v, nil
}
