package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// StrictDecoder decodes the kinds the scheme adders register, strictly: an
// unknown or duplicate field is an error, so a misspelt or misplaced field
// fails a render test instead of being dropped by the API server.
func StrictDecoder(adders ...func(*runtime.Scheme) error) (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range adders {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

// DecodeStream splits a YAML stream (what kustomize and helm print) into its
// documents, skips those that hold nothing but comments, and hands each
// other one, decoded with dec, to each.
func DecodeStream(stream []byte, dec runtime.Decoder, each func(runtime.Object, *schema.GroupVersionKind) error) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var v map[string]any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			return fmt.Errorf("parse:\n%s\n%w", doc, err)
		}
		if len(v) == 0 {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("decode:\n%s\n%w", doc, err)
		}
		if err := each(obj, gvk); err != nil {
			return err
		}
	}
}

// DecodeByKind decodes every document of a YAML stream strictly, with the
// kinds the scheme adders register, and groups the objects by kind.
func DecodeByKind(stream []byte, adders ...func(*runtime.Scheme) error) (map[string][]runtime.Object, error) {
	dec, err := StrictDecoder(adders...)
	if err != nil {
		return nil, err
	}
	out := map[string][]runtime.Object{}
	err = DecodeStream(stream, dec, func(obj runtime.Object, gvk *schema.GroupVersionKind) error {
		out[gvk.Kind] = append(out[gvk.Kind], obj)
		return nil
	})
	return out, err
}
