package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/loader"
)

// revision names a loaded set: the Git commit of a checkout, else a content hash.
func revision(src Source, loaded *loader.Result) (string, error) {
	if src.Dir != "" {
		if commit, ok := gitCommit(src.Dir); ok {
			return "git-" + commit[:min(12, len(commit))], nil
		}
	}
	return contentHash(src, loaded)
}

// contentHash hashes module paths (relative to the set's root), sources and
// data, so the same files give the same revision wherever they are mounted.
func contentHash(src Source, loaded *loader.Result) (string, error) {
	h := sha256.New()
	names := make([]string, 0, len(loaded.Modules))
	for name := range loaded.Modules {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rel := relativeName(src, name)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(loaded.Modules[name].Raw))
		h.Write(loaded.Modules[name].Raw)
	}
	data, err := json.Marshal(loaded.Documents)
	if err != nil {
		return "", fmt.Errorf("hash policy data: %w", err)
	}
	h.Write(data)
	return "sha256-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// relativeName is a module's path below the set's root; OPA's loader names
// modules by their path without its leading slash.
func relativeName(src Source, name string) string {
	if src.Dir == "" {
		return name
	}
	root := strings.TrimPrefix(filepath.Clean(src.Dir), "/")
	return strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(name, "/"), root), "/")
}

// gitCommit reads HEAD of the checkout that holds dir, without running git.
// dir may be the checkout's root or any directory below it (the git-sync
// overlay loads /git/current/policies), and may be reached through symlinks:
// git-sync v4 publishes root/<link> -> .worktrees/<commit>, a linked worktree
// whose .git file names its git dir relative to where the worktree really is
// ("gitdir: ../../.git/worktrees/<commit>"), so the search starts from the
// resolved path. As with `git rev-parse HEAD`, the commit says nothing of
// uncommitted edits; git-sync's worktrees have none.
func gitCommit(dir string) (string, bool) {
	gitDir, ok := findGitDir(dir)
	if !ok {
		return "", false
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", false
	}
	ref, isRef := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: ")
	if !isRef {
		return ref, isHash(ref)
	}
	return resolveRef(gitDir, ref)
}

// findGitDir looks for .git in dir's resolved path and then in each parent.
func findGitDir(dir string) (string, bool) {
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		d = dir
	}
	d, err = filepath.Abs(d)
	if err != nil {
		return "", false
	}
	for {
		if gd, ok := gitDirAt(d); ok {
			return gd, true
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", false
		}
		d = parent
	}
}

// gitDirAt returns the git dir of a checkout rooted at dir: .git itself, or
// the directory a .git file ("gitdir: …", a linked worktree) names.
func gitDirAt(dir string) (string, bool) {
	p := filepath.Join(dir, ".git")
	info, err := os.Stat(p)
	if err != nil {
		return "", false
	}
	if info.IsDir() {
		return p, true
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", false
	}
	if !filepath.IsAbs(gd) {
		gd = filepath.Join(dir, gd)
	}
	return gd, true
}

// resolveRef finds a branch's commit in loose refs or packed-refs, looking in
// the worktree's own git dir and then in the common one.
func resolveRef(gitDir, ref string) (string, bool) {
	dirs := []string{gitDir}
	if common, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(common))
		if !filepath.IsAbs(c) {
			c = filepath.Join(gitDir, c)
		}
		dirs = append(dirs, c)
	}
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, filepath.FromSlash(ref))); err == nil {
			h := strings.TrimSpace(string(b))
			return h, isHash(h)
		}
		if h, ok := packedRef(d, ref); ok {
			return h, true
		}
	}
	return "", false
}

func packedRef(gitDir, ref string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if h, name, ok := strings.Cut(line, " "); ok && name == ref && isHash(h) {
			return h, true
		}
	}
	return "", false
}

func isHash(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
