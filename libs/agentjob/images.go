package agentjob

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Images maps database servers to the agent images that serve them (an
// operator's --agent-images): an image per PostgreSQL major (its tools
// serve servers of that major and older), one for Oracle MySQL, one for
// MariaDB. The zero value maps nothing: every run uses the default image.
type Images struct {
	// Postgres holds the image of each PostgreSQL major.
	Postgres map[int]string
	// MySQL and MariaDB are the images for those servers ("" = default).
	MySQL, MariaDB string
}

// ParseImages reads "postgres:13=IMG,postgres:17=IMG,mysql=IMG,mariadb=IMG"
// (any subset; "" is none).
func ParseImages(s string) (Images, error) {
	var im Images
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, img, ok := strings.Cut(item, "=")
		if !ok || img == "" {
			return Images{}, fmt.Errorf("--agent-images: %q: want KEY=IMAGE (postgres:<major>, mysql, mariadb)", item)
		}
		switch key, major, _ := strings.Cut(key, ":"); key {
		case "postgres":
			m, err := strconv.Atoi(major)
			if err != nil || m < 1 {
				return Images{}, fmt.Errorf("--agent-images: %q: want postgres:<major>=IMAGE", item)
			}
			if im.Postgres == nil {
				im.Postgres = map[int]string{}
			}
			im.Postgres[m] = img
		case "mysql":
			im.MySQL = img
		case "mariadb":
			im.MariaDB = img
		default:
			return Images{}, fmt.Errorf("--agent-images: %q: unknown key %q (postgres:<major>, mysql, mariadb)", item, key)
		}
	}
	return im, nil
}

// For is the image for a server: for PostgreSQL the image of the smallest
// configured major at least the server's (dump tools of a major serve
// servers of that major and older); for Oracle MySQL and MariaDB their
// image; def when nothing configured serves it or the server is not known
// yet (nil: no run reported it).
func (im Images) For(s *cairnv1.ServerInfo, def string) string {
	if s == nil {
		return def
	}
	switch s.Engine {
	case "postgres":
		major, err := strconv.Atoi(strings.SplitN(s.Version, ".", 2)[0])
		if err != nil {
			return def
		}
		majors := make([]int, 0, len(im.Postgres))
		for m := range im.Postgres {
			majors = append(majors, m)
		}
		slices.Sort(majors)
		for _, m := range majors {
			if m >= major {
				return im.Postgres[m]
			}
		}
	case "mysql":
		if im.MySQL != "" {
			return im.MySQL
		}
	case "mariadb":
		if im.MariaDB != "" {
			return im.MariaDB
		}
	}
	return def
}
