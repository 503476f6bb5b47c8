package engine

// NoCleartextPassword is the connection setting that keeps the password from
// going out in clear (issue 47, item 1): a server that asks for it in clear
// (pg_hba `password`, `ldap`, `radius`, `pam`) — e.g. one a spec change
// pointed the agent at — is refused before the password is sent; SCRAM
// (and md5, and no password) still connect. The Go driver (pgx) honours it
// in every image; libpq honours it from 16 on only (an older libpq refuses
// the unknown keyword), see ToolsNoCleartext.
const NoCleartextPassword = "require_auth='!password'"

// ToolsNoCleartext is " "+NoCleartextPassword for a conninfo of the
// PostgreSQL tools when their major (toolset: PGVersions) is 16 or newer —
// Debian's libpq5 is its release's newest PostgreSQL, never older than the
// client tools it ships — and "" otherwise (PostgreSQL 13 and 15 images:
// libpq 13 and 15 have no require_auth, and the tools then send the
// password to a server that asks for it in clear; docs/security.md).
func ToolsNoCleartext() string {
	toolsMu.RLock()
	defer toolsMu.RUnlock()
	if pgToolMajor >= 16 {
		return " " + NoCleartextPassword
	}
	return ""
}
