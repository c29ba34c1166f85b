package record

import (
	"strings"
	"testing"
)

var (
	key1 = []byte("0123456789abcdef0123456789abcdef-key-one")
	key2 = []byte("0123456789abcdef0123456789abcdef-key-two")
)

func TestKeySetValidate(t *testing.T) {
	tests := map[string]struct {
		keys    KeySet
		wantErr string
	}{
		"none":                 {},
		"current and previous": {keys: KeySet{Current: key1, Previous: key2}},
		"a short key":          {keys: KeySet{Current: []byte("secret")}, wantErr: "record key current has 6 bytes"},
		"previous alone":       {keys: KeySet{Previous: key1}, wantErr: "previous is set without current"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.keys.Validate()
			if got := errString(err); !strings.Contains(got, tc.wantErr) || (tc.wantErr == "") != (err == nil) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
