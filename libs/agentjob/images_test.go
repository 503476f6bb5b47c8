package agentjob

import (
	"testing"

	cairnv1 "cairn.dev/apis/meta/v1"
)

func TestImagesFor(t *testing.T) {
	im, err := ParseImages("postgres:13=a13, postgres:17=a17,postgres:18=a18,mysql=amy")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		srv  *cairnv1.ServerInfo
		want string
	}{
		{nil, "def"},
		{&cairnv1.ServerInfo{Engine: "postgres", Version: "12.4"}, "a13"},
		{&cairnv1.ServerInfo{Engine: "postgres", Version: "13.23"}, "a13"},
		{&cairnv1.ServerInfo{Engine: "postgres", Version: "15.20"}, "a17"},
		{&cairnv1.ServerInfo{Engine: "postgres", Version: "18.6"}, "a18"},
		{&cairnv1.ServerInfo{Engine: "postgres", Version: "19beta1"}, "def"},
		{&cairnv1.ServerInfo{Engine: "postgres", Version: "19.1"}, "def"},
		{&cairnv1.ServerInfo{Engine: "mysql", Version: "9.7.4"}, "amy"},
		{&cairnv1.ServerInfo{Engine: "mariadb", Version: "11.8.9"}, "def"},
	} {
		if got := im.For(tc.srv, "def"); got != tc.want {
			t.Errorf("For(%+v) = %q, want %q", tc.srv, got, tc.want)
		}
	}
	if got := (Images{}).For(&cairnv1.ServerInfo{Engine: "postgres", Version: "18.6"}, "def"); got != "def" {
		t.Errorf("no images: %q", got)
	}
	for _, bad := range []string{"postgres=x", "postgres:x=y", "mysql", "oracle=x", "mysql="} {
		if _, err := ParseImages(bad); err == nil {
			t.Errorf("ParseImages(%q): no error", bad)
		}
	}
	if im, err := ParseImages(""); err != nil || im.Postgres != nil || im.MySQL != "" {
		t.Errorf("ParseImages(\"\") = %+v, %v", im, err)
	}
}
