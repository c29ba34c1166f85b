package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

const (
	keyA = "6f1c0a4e9b2d7c83a5e1f0b9d4c2a7e8136b9f0e2d4c8a1b7e5f3d9c0a2b4e6f"
	keyB = "a2b4e6f6f1c0a4e9b2d7c83a5e1f0b9d4c2a7e8136b9f0e2d4c8a1b7e5f3d9c0"
)

// writeKeys replaces the directory's key files: name → content, "" removes.
func writeKeys(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if content == "" {
			os.Remove(path)
			continue
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecordKeysReload follows a Secret through its life: absent, created,
// rotated in two steps, broken (the last good keys stay), removed.
func TestRecordKeysReload(t *testing.T) {
	dir := t.TempDir()
	r, err := newRecordKeys(dir, time.Hour, logr.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		files   map[string]string
		want    record.KeySet
		wantErr string
	}{
		{name: "no Secret yet", want: record.KeySet{}},
		{name: "created", files: map[string]string{keyFileCurrent: keyA + "\n"}, want: record.KeySet{Current: []byte(keyA)}},
		{name: "the new key accepted first", files: map[string]string{keyFilePrevious: keyB}, want: record.KeySet{Current: []byte(keyA), Previous: []byte(keyB)}},
		{name: "then sealing with it", files: map[string]string{keyFileCurrent: keyB, keyFilePrevious: keyA}, want: record.KeySet{Current: []byte(keyB), Previous: []byte(keyA)}},
		{name: "a short key is refused", files: map[string]string{keyFileCurrent: "short"}, wantErr: "record key current has 5 bytes",
			want: record.KeySet{Current: []byte(keyB), Previous: []byte(keyA)}},
		{name: "removed", files: map[string]string{keyFileCurrent: "", keyFilePrevious: ""}, want: record.KeySet{}},
	}
	for _, s := range steps {
		writeKeys(t, dir, s.files)
		err := r.reload()
		if got := errText(err); !strings.Contains(got, s.wantErr) || (s.wantErr == "") != (err == nil) {
			t.Errorf("%s: reload() = %v, want an error containing %q", s.name, err, s.wantErr)
		}
		if diff := cmp.Diff(s.want, r.RecordKeys()); diff != "" {
			t.Errorf("%s: keys (-want +got):\n%s", s.name, diff)
		}
	}
}

func TestRecordKeysRefuseABadKeyAtStart(t *testing.T) {
	dir := t.TempDir()
	writeKeys(t, dir, map[string]string{keyFilePrevious: keyA})
	if _, err := newRecordKeys(dir, time.Hour, logr.Discard(), nil); err == nil || !strings.Contains(err.Error(), "previous is set without current") {
		t.Errorf("newRecordKeys = %v, want the missing current key named", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
