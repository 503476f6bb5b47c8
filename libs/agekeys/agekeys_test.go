package agekeys

import (
	"strings"
	"testing"
)

// Keys made by age-keygen (test keys only).
const (
	recipient = "age1a8dtkykuu5j89rpp4lvxz7d4h70ypznu2gxxjfxvqqyrkecl8czqylpdee"
	other     = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
	identity  = "AGE-SECRET-KEY-1AS7GK7NC5NHCVCCKCNGGKZRLFJYTGQZ2GKCRZVVXKHA7MR3XADYS0H826Y"
)

func TestCheckRecipients(t *testing.T) {
	for text, want := range map[string]string{
		recipient: "",
		"# team\n" + recipient + "\n\n  " + other + "  \n": "",
		"":                                 "no recipients",
		"# only a comment\n":               "no recipients",
		recipient + "\nssh-ed25519 AAAA":   "line 2 (key 2) is not an age X25519 public key",
		"# c\n" + identity:                 "line 2 (key 1) is a private key",
		recipient[:len(recipient)-1] + "q": "line 1 (key 1) is not an age X25519 public key (age1…, as age-keygen prints it): bad checksum",
		strings.ToUpper(recipient):         "line 1 (key 1) is not an age X25519 public key",
		"age1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq": "line 1 (key 1)",
	} {
		err := CheckRecipients(text)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", text, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want %q", text, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "AS7GK7NC5") {
			t.Errorf("the message shows the private key: %v", err)
		}
	}
}

func TestCheckIdentities(t *testing.T) {
	for text, want := range map[string]string{
		identity:                    "",
		"# key\n" + identity + "\n": "",
		"":                          "no identity",
		recipient:                   "line 1 (key 1) is not an age X25519 private key",
		identity + "\n" + strings.ToLower(identity): "line 2 (key 2) is not an age X25519 private key",
		identity[:len(identity)-2] + "QQ":           "line 1 (key 1)",
	} {
		err := CheckIdentities(text)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", text, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want %q", text, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "AS7GK7NC5") {
			t.Errorf("the message shows the private key: %v", err)
		}
	}
}
