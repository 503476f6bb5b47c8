package access

import (
	"fmt"
	"strings"
)

// Images is an allow-list of container images a spec may name (a
// MigrationJob's spec.image): whoever may create the object runs the image
// with the Secrets it references in its environment, so only images the
// operator's installer chose run.
//
// An entry is repository[:tag][@digest]. An image matches an entry of the
// same repository when it names the entry's digest, or — for an entry
// without a digest — when it has no digest and the entry's tag (":latest"
// when none is written). A tag alone never matches an entry pinned by
// digest: tags move.
type Images struct{ entries []imageRef }

type imageRef struct{ repo, tag, digest string }

func (r imageRef) String() string {
	s := r.repo
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

func parseImage(s string) (imageRef, error) {
	s = strings.TrimSpace(s)
	var r imageRef
	if s == "" || strings.ContainsAny(s, " \t\n") {
		return r, fmt.Errorf("image %q: not an image reference", s)
	}
	name, digest, hasDigest := strings.Cut(s, "@")
	if hasDigest {
		if !strings.HasPrefix(digest, "sha256:") || len(digest) != len("sha256:")+64 {
			return r, fmt.Errorf("image %q: the digest must be sha256:<64 hex digits>", s)
		}
		r.digest = digest
	}
	// A ':' after the last '/' separates the tag (a ':' before it is a
	// registry port).
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, r.tag = name[:i], name[i+1:]
		if r.tag == "" {
			return r, fmt.Errorf("image %q: empty tag", s)
		}
	}
	if name == "" {
		return r, fmt.Errorf("image %q: no repository", s)
	}
	r.repo = name
	return r, nil
}

// ParseImages reads an allow-list; empty entries are skipped.
func ParseImages(list []string) (*Images, error) {
	l := &Images{}
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			continue
		}
		r, err := parseImage(s)
		if err != nil {
			return nil, err
		}
		l.entries = append(l.entries, r)
	}
	return l, nil
}

// Allowed reports whether image matches an entry.
func (l *Images) Allowed(image string) bool {
	img, err := parseImage(image)
	if err != nil || l == nil {
		return false
	}
	for _, e := range l.entries {
		if e.repo != img.repo {
			continue
		}
		switch {
		case img.digest != "":
			if e.digest == img.digest && (img.tag == "" || e.tag == "" || e.tag == img.tag) {
				return true
			}
		case e.digest == "":
			if tagOrLatest(e.tag) == tagOrLatest(img.tag) {
				return true
			}
		}
	}
	return false
}

func tagOrLatest(t string) string {
	if t == "" {
		return "latest"
	}
	return t
}

// String lists the entries, for messages.
func (l *Images) String() string {
	if l == nil || len(l.entries) == 0 {
		return "(none)"
	}
	out := make([]string, len(l.entries))
	for i, e := range l.entries {
		out[i] = e.String()
	}
	return strings.Join(out, ", ")
}

// NotAllowed is the message refusing image at field.
func (l *Images) NotAllowed(field, image string) string {
	return fmt.Sprintf("%s: image %q is not in the operator's allow-list (--allowed-agent-images: %s); leave it empty for the operator's agent image, or ask the installer to allow it",
		field, image, l)
}
