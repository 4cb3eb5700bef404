"""The privacy policy's built-in rules (policy.py asks them in order): the names and places of
secret files, the ignore files a project writes for AI tools, and the content rules that find
a credential in one line of text."""

from __future__ import annotations

import re

__all__ = ["AI_IGNORE_FILES", "CONTENT_RULES", "IGNORE_FILE", "SECRET_DIRS", "SECRET_NAMES", "SECRET_PATHS",
           "line_reason"]

IGNORE_FILE = ".local-copilot-ignore"
# what other AI tools' users already write in their projects; always read (they only narrow)
AI_IGNORE_FILES = (".aiignore", ".aiexclude", ".cursorignore")

# Anything below these directories is key material, tokens or cloud credentials.
SECRET_DIRS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".password-store", ".vault", ".secrets")
# Files (or directories) that hold credentials where their directory alone does not say so.
SECRET_PATHS = (
    ".docker/config.json", ".config/gcloud/**", ".config/gh/hosts.yml", ".config/hub",
    ".terraform.d/credentials.tfrc.json", ".config/rclone/rclone.conf", ".local/share/keyrings/**",
)
# Matched against the file name.
SECRET_NAMES = (
    # environment and secret files
    ".env", ".env.*", "*.env", ".envrc", ".flaskenv", "secrets.*", "secret.*", "*.secret", "*.secrets",
    "credentials", "credentials.*", "*credentials.json",
    # credential files of common tools
    ".git-credentials", ".gitcookies", ".npmrc", ".yarnrc.yml", ".pypirc", ".pgpass", ".netrc", "_netrc",
    ".my.cnf", ".htpasswd", ".vault-token", ".boto", ".s3cfg", ".dockercfg", "terraform.tfvars", "*.auto.tfvars",
    "service-account*.json", "wp-config.php",
    # SSH and deploy keys
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*deploy_key*", "*deploy-key*", "known_hosts", "authorized_keys",
    # keys, certificates and keystores
    "*.pem", "*.key", "*.p12", "*.pfx", "*.p8", "*.crt", "*.cer", "*.der", "*.csr", "*.p7b", "*.p7c",
    "*.jks", "*.keystore", "*.bks", "*.ppk", "*.gpg", "*.pgp", "*.asc", "*.kdbx", "*.ovpn", "*.mobileprovision",
)

# A URL's password that stands for one, as documentation and templates write it: a template
# (`${DB_PASS}`, `$PASS`, `{password}`, `{{ pw }}`, `<password>`, `%s`, `%(pw)s`), a mask (`xxxx`,
# `****`, `....`) or the word itself (`password`, `your_password`, `changeme`, `secret`,
# `token`), so completion stays on around such examples. Anything else is taken for a real one,
# `user:pass@` and the `postgres:postgres` of a local database included: the rule refuses what
# may be a working credential, not only a strong one.
_URL_PLACEHOLDER = (r"[$<{]|%[s({]|(?:\*+|x+|X+|\.+|#+|•+)@"
                    r"|(?i:(?:your|my|db|the|some)[_\-]?)?"
                    r"(?i:password|passwd|secret|changeme|token|redacted|placeholder|example)@")

# (reason, regex) on one line of text; each is specific enough that a hit is a credential, not code.
CONTENT_RULES: tuple[tuple[str, str], ...] = (
    ("a private-key block", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    ("an AWS access key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ("a GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("a Slack token", r"\bxox[abposr]-[0-9A-Za-z]+-[0-9A-Za-z-]{8,}"),
    ("an OpenAI key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{8,}T3BlbkFJ[A-Za-z0-9_\-]{8,}"),
    ("an Anthropic key", r"\bsk-ant-[a-z]+\d\d-[A-Za-z0-9_\-]{40,}"),
    ("a Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("a Stripe secret key", r"\b[sr]k_live_[0-9A-Za-z]{20,}"),
    # header and payload are base64url JSON objects (`{"` is `eyJ`), then a signature
    ("a JSON Web Token", r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{16,}"),
    ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{34,}\b"),
    # the docs' masked example (.../XXXXXXXXXXXXXXXXXXXXXXXX) is not one
    ("a Slack webhook URL", r"\bhooks\.slack\.com/(?:services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/(?!X+\b)[A-Za-z0-9]{16,}"
                            r"|(?:workflows|triggers)/T[A-Z0-9]{6,}/[A-Za-z0-9/]{16,})"),
    # scheme://user:password@host, any scheme (postgres, mysql, mongodb+srv, redis, amqp, https, ...),
    # unless the password is a placeholder (see _URL_PLACEHOLDER)
    ("a URL with a password", r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/?#@'\"`<>]*:"
                              r"(?!" + _URL_PLACEHOLDER + r")[^\s/?#@'\"`]+@[^\s/?#@'\"`:]"),
)
_CONTENT = [(reason, re.compile(rx)) for reason, rx in CONTENT_RULES]
# A cheap first look: most lines hold none of these, and are done after one search.
_CONTENT_ANY = re.compile("|".join(f"(?:{rx})" for _, rx in CONTENT_RULES))


def line_reason(line: str) -> str | None:
    """Which credential `line` holds (CONTENT_RULES' reason), or None."""
    if len(line) < 16 or not _CONTENT_ANY.search(line):
        return None
    for reason, rx in _CONTENT:
        if rx.search(line):
            return reason
    return None
