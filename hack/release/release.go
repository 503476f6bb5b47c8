// Package release releases one Cairn operator on its own: it checks the
// version against the operator's earlier tags (operators/<name>/vX.Y.Z),
// renders the operator's kustomize base (deploy/<name>) with that image tag
// into one install manifest, and creates the local git tag. Nothing of another
// operator is read or changed.
package release

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// ImageRegistry is where every Cairn image is published.
const ImageRegistry = "ghcr.io/cairn-dev"

// AgentImage is the agent's image name, pinned by platform/kustomization.yaml.
const AgentImage = ImageRegistry + "/agent"

// OperatorImage is the image name of operator op.
func OperatorImage(op string) string { return ImageRegistry + "/" + op + "-operator" }

// TagPrefix is the prefix of operator op's release tags (also its Go module's
// version tags, the module being operators/<op>).
// The plugin's tags are kubectl-cairn/vX.Y.Z (its module is kubectl-cairn).
func TagPrefix(op string) string {
	if op == Plugin {
		return Plugin + "/"
	}
	return "operators/" + op + "/"
}

// Tag is the release tag of op at version.
func Tag(op, version string) string { return TagPrefix(op) + version }

var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// ValidVersion reports whether v is a full semantic version with a leading v
// (vX.Y.Z, optionally with a pre-release; no build metadata).
func ValidVersion(v string) error {
	if !releaseVersion.MatchString(v) {
		return fmt.Errorf("version %q is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE]", v)
	}
	if _, err := semver.Parse(v[1:]); err != nil {
		return fmt.Errorf("version %q: %w", v, err)
	}
	return nil
}

// compare orders two valid versions (with their leading v) by semver precedence.
func compare(a, b string) int {
	return semver.MustParse(a[1:]).Compare(semver.MustParse(b[1:]))
}

// Latest returns the highest version among op's tags (any other tag is
// ignored), or "" if there is none.
func Latest(tags []string, op string) string {
	var vs []string
	for _, t := range tags {
		v, ok := strings.CutPrefix(strings.TrimSpace(t), TagPrefix(op))
		if ok && ValidVersion(v) == nil {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return ""
	}
	sort.Slice(vs, func(i, j int) bool { return compare(vs[i], vs[j]) < 0 })
	return vs[len(vs)-1]
}

// CheckVersion fails unless version is valid and newer than op's latest tag.
func CheckVersion(tags []string, op, version string) error {
	if err := ValidVersion(version); err != nil {
		return err
	}
	if last := Latest(tags, op); last != "" && compare(version, last) <= 0 {
		return fmt.Errorf("version %s of %s is not newer than its last release %s", version, op, last)
	}
	return nil
}

// Operators lists the operators that have a kustomize base under root/deploy.
func Operators(root string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(root, "deploy", "*", "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var ops []string
	for _, m := range matches {
		ops = append(ops, filepath.Base(filepath.Dir(m)))
	}
	sort.Strings(ops)
	return ops, nil
}

// PlatformImages returns the images: entries of root/platform/kustomization.yaml.
func PlatformImages(root string) ([]types.Image, error) {
	data, err := os.ReadFile(filepath.Join(root, "platform", "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k types.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("platform/kustomization.yaml: %w", err)
	}
	return k.Images, nil
}

// Render builds the install manifest of op at version: root/deploy/<op> with
// the cairn-system Namespace (root/platform/namespace.yaml), the operator's
// image tagged version, and the agent image the platform pins. The output
// depends on op's base, the Namespace and the agent pin only.
func Render(root, op, version string) ([]byte, error) {
	if err := ValidVersion(version); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(root, "deploy", op)
	if _, err := os.Stat(filepath.Join(base, "kustomization.yaml")); err != nil {
		return nil, fmt.Errorf("operator %q has no kustomize base: %w", op, err)
	}
	images := []types.Image{{Name: OperatorImage(op), NewTag: version}}
	pins, err := PlatformImages(root)
	if err != nil {
		return nil, err
	}
	for _, img := range pins {
		if img.Name == AgentImage {
			images = append(images, img)
		}
	}
	ns, err := os.ReadFile(filepath.Join(root, "platform", "namespace.yaml"))
	if err != nil {
		return nil, err
	}

	// A throw-away overlay next to nothing of the repository: it names the
	// base by a path relative to itself.
	dir, err := os.MkdirTemp("", "cairn-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return nil, err
	}
	// No namespace: the base puts its objects in cairn-system itself, and
	// kustomize would also set one on cluster-scoped kinds it does not know
	// (MutatingAdmissionPolicy).
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Resources: []string{"namespace.yaml", filepath.ToSlash(rel)},
		Images:    images,
	}
	kdata, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), kdata, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "namespace.yaml"), ns, 0o644); err != nil {
		return nil, err
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", base, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Cairn %s operator %s: kubectl apply --server-side -f <this file>\n# Rendered from deploy/%s by make release; needs cert-manager (docs/install.md).\n", op, version, op)
	return append([]byte(header), out...), nil
}

// DistFile is where make release writes op's manifest, relative to the root.
func DistFile(op, version string) string {
	return filepath.Join("dist", op+"-"+version+".yaml")
}

// GitTags lists the tags of the repository at dir that start with op's prefix.
func GitTags(dir, op string) ([]string, error) {
	out, err := git(dir, "tag", "--list", TagPrefix(op)+"v*")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// CheckClean fails if the paths op's release is made of (operators/<op>,
// deploy/<op> and the component every base includes, deploy/components) have
// uncommitted changes, so a tag names exactly what was released.
func CheckClean(dir, op string) error {
	out, err := git(dir, "status", "--porcelain", "--", "operators/"+op, "deploy/"+op, "deploy/components")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		return fmt.Errorf("uncommitted changes in %s's paths; commit them before releasing:\n%s", op, out)
	}
	return nil
}

// CreateTag creates the local tag operators/<op>/<version> at HEAD of the
// repository at dir (not pushed).
func CreateTag(dir, op, version string) error {
	_, err := git(dir, "tag", Tag(op, version))
	return err
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ErrUsage is returned for a bad command line.
var ErrUsage = errors.New("usage")
