package cdi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// WriteSpec writes spec to path, unless the file holds it already, atomically, at the oldest CDI version that
// holds it, which every CDI-aware runtime reads: a runtime watching the
// directory sees the old file or the new one, never half of one.
func WriteSpec(path string, spec *cdispec.Spec) error {
	version, err := cdispec.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI spec %s: %w", path, err)
	}
	spec.Version = version
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode CDI spec %s: %w", path, err)
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil // unchanged: no event for the runtime's watcher
	}
	return WriteAtomic(path, b)
}

// WriteAtomic writes a file through a synced temporary one and a rename,
// so a reader (a runtime, the next agent) sees the old file or the new one,
// never half of one. The agent's other files (the DRA checkpoint, the MPS
// limits) are written with it too.
func WriteAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
