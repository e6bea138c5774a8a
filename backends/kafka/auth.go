package kafka

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// TokenSource hands OAUTHBEARER tokens to franz-go, which asks for one on
// every new connection and re-authentication. A token is read from a file,
// an environment variable or a command's standard output; a JWT's exp claim
// says how long it may be reused, and it is fetched again TokenRefreshMargin
// before it expires. A token with no readable expiry is fetched every time
// (re-reading a file or variable is cheap; a command is the user's choice).
type TokenSource struct {
	File    string
	Env     string
	Command []string
	// Field prefixes errors ("contexts.prod.sasl."), so they name the setting.
	Field string
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time

	mu     sync.Mutex
	cached string
	expiry time.Time
}

// TokenRefreshMargin is how long before its expiry a cached token is
// replaced: long enough for a connection to finish authenticating with it.
const TokenRefreshMargin = time.Minute

// Token returns a token that is not about to expire.
func (s *TokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.cached != "" && now.Add(TokenRefreshMargin).Before(s.expiry) {
		return s.cached, nil
	}
	tok, err := s.fetch(ctx)
	if err != nil {
		return "", err
	}
	s.cached, s.expiry = tok, time.Time{}
	if exp, ok := jwtExpiry(tok); ok {
		if !now.Before(exp) {
			return "", fmt.Errorf("%s: the token expired at %s", s.field(), exp.UTC().Format(time.RFC3339))
		}
		s.expiry = exp
	}
	return tok, nil
}

func (s *TokenSource) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *TokenSource) field() string {
	switch {
	case s.File != "":
		return s.Field + "token_file"
	case s.Env != "":
		return s.Field + "token_env"
	}
	return s.Field + "token_command"
}

func (s *TokenSource) fetch(ctx context.Context) (string, error) {
	var raw []byte
	switch {
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("%s: cannot read %s: %v", s.field(), s.File, errors.Unwrap(err))
		}
		raw = b
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok {
			return "", fmt.Errorf("%s: environment variable %s is not set", s.field(), s.Env)
		}
		raw = []byte(v)
	case len(s.Command) > 0:
		cmd := exec.CommandContext(ctx, s.Command[0], s.Command[1:]...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			// The command's own words, first line only and capped: its
			// output is not ours to print whole.
			why := firstLine(stderr.String(), 200)
			if why != "" {
				why = ": " + why
			}
			return "", fmt.Errorf("%s: %s failed: %v%s", s.field(), s.Command[0], err, why)
		}
		raw = out
	default:
		return "", fmt.Errorf("%s: no token source configured", s.Field+"token_file")
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", fmt.Errorf("%s: the token is empty", s.field())
	}
	if strings.ContainsAny(tok, "\x01\n\r") {
		return "", fmt.Errorf("%s: the token holds a line break or control character", s.field())
	}
	return tok, nil
}

// jwtExpiry reads the exp claim of a JWT without verifying it (the broker
// verifies; Berth only needs to know when to fetch a new one).
func jwtExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil || *claims.Exp <= 0 || *claims.Exp > 1e11 {
		return time.Time{}, false
	}
	return time.Unix(int64(*claims.Exp), 0), true
}

// OAuthBearer is the OAUTHBEARER mechanism drawing tokens from src.
func OAuthBearer(src *TokenSource, extensions map[string]string) sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, err := src.Token(ctx)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok, Extensions: extensions}, nil
	})
}

// AWSCredentials finds AWS credentials the way the AWS tools do, for the
// two sources Berth supports: the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) and a profile of the shared
// credentials file (AWS_SHARED_CREDENTIALS_FILE, default
// ~/.aws/credentials). A profile named in the config wins; otherwise the
// environment, then AWS_PROFILE (default "default"). They are read on every
// authentication, so rotated credentials are picked up. Single sign-on,
// credential_process and role assumption are not supported.
type AWSCredentials struct {
	Profile string
	Field   string // error prefix, as TokenSource.Field
}

// Load returns the credentials, or an error naming where it looked.
func (c AWSCredentials) Load() (aws.Auth, error) {
	if c.Profile == "" {
		id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
		if id != "" && secret != "" {
			return aws.Auth{AccessKey: id, SecretKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, nil
		}
		if id != "" || secret != "" {
			return aws.Auth{}, fmt.Errorf("%saws_profile: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together (one is not set)", c.Field)
		}
	}
	profile := c.Profile
	if profile == "" {
		profile = os.Getenv("AWS_PROFILE")
	}
	if profile == "" {
		profile = "default"
	}
	file := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return aws.Auth{}, fmt.Errorf("%saws_profile: no AWS credentials: AWS_ACCESS_KEY_ID is not set and there is no home directory", c.Field)
		}
		file = filepath.Join(home, ".aws", "credentials")
	}
	f, err := os.Open(file)
	if err != nil {
		return aws.Auth{}, fmt.Errorf("%saws_profile: no AWS credentials: AWS_ACCESS_KEY_ID is not set and %s cannot be read: %v", c.Field, file, errors.Unwrap(err))
	}
	defer f.Close()
	keys, found := iniSection(f, profile)
	if !found {
		return aws.Auth{}, fmt.Errorf("%saws_profile: profile %q is not in %s", c.Field, profile, file)
	}
	a := aws.Auth{AccessKey: keys["aws_access_key_id"], SecretKey: keys["aws_secret_access_key"], SessionToken: keys["aws_session_token"]}
	if a.AccessKey == "" || a.SecretKey == "" {
		return aws.Auth{}, fmt.Errorf("%saws_profile: profile %q in %s has no aws_access_key_id and aws_secret_access_key", c.Field, profile, file)
	}
	return a, nil
}

// iniSection reads the key = value lines of [name] from an AWS-style INI file.
func iniSection(f *os.File, name string) (map[string]string, bool) {
	keys := map[string]string{}
	in, found := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			in = strings.TrimSpace(line[1:len(line)-1]) == name
			found = found || in
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && in {
			keys[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return keys, found
}

// MSKIAM is the AWS_MSK_IAM mechanism, loading credentials on every
// authentication.
func MSKIAM(c AWSCredentials) sasl.Mechanism {
	return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
		return c.Load()
	})
}

func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
