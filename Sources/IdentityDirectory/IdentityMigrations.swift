import Logging
import Storage

/// The identity service's schema. Times are BIGINT epoch seconds; ids are TEXT (UUIDs in
/// lowercase); lists are JSON text; secrets are stored only as SHA-256 or password hashes.
package enum IdentityMigrations {
    package static let runner = MigrationRunner(
        namespace: "identity",
        migrations: [
            Migration(
                version: 1, name: "tenants, applications, user flows",
                [
                    """
                    CREATE TABLE tenants (
                        id TEXT PRIMARY KEY, name TEXT NOT NULL, name_lower TEXT NOT NULL UNIQUE,
                        display_name TEXT NOT NULL, default_policy TEXT NOT NULL,
                        page_templates_path TEXT, is_default BOOLEAN NOT NULL, created_at BIGINT NOT NULL)
                    """,
                    """
                    CREATE TABLE applications (
                        client_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        display_name TEXT NOT NULL, kind TEXT NOT NULL, redirect_uris TEXT NOT NULL,
                        allow_public_client_flows BOOLEAN NOT NULL, allow_implicit BOOLEAN NOT NULL,
                        allow_plain_pkce BOOLEAN NOT NULL, app_id_uri TEXT, exposed_scopes TEXT NOT NULL,
                        created_at BIGINT NOT NULL)
                    """,
                    "CREATE INDEX applications_tenant ON applications (tenant_id)",
                    """
                    CREATE TABLE application_secrets (
                        id TEXT PRIMARY KEY, client_id TEXT NOT NULL REFERENCES applications(client_id) ON DELETE CASCADE,
                        secret_hash TEXT NOT NULL, hint TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT)
                    """,
                    "CREATE INDEX application_secrets_client ON application_secrets (client_id)",
                    """
                    CREATE TABLE user_flows (
                        tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE, name_lower TEXT NOT NULL,
                        name TEXT NOT NULL, type TEXT NOT NULL, definition TEXT NOT NULL,
                        PRIMARY KEY (tenant_id, name_lower))
                    """,
                ]),
            Migration(
                version: 2, name: "users and lockout",
                [
                    """
                    CREATE TABLE users (
                        id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
                        identity_provider TEXT NOT NULL, sign_in_name TEXT NOT NULL, email TEXT,
                        display_name TEXT NOT NULL, attributes TEXT NOT NULL, password_hash TEXT,
                        created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, password_changed_at BIGINT,
                        failed_attempts BIGINT NOT NULL DEFAULT 0, lockout_count BIGINT NOT NULL DEFAULT 0,
                        locked_until BIGINT, last_failed_fingerprint TEXT,
                        UNIQUE (tenant_id, identity_provider, sign_in_name))
                    """
                ]),
            Migration(
                version: 3, name: "signing keys",
                [
                    """
                    CREATE TABLE signing_keys (
                        kid TEXT PRIMARY KEY, private_key_pem TEXT NOT NULL, bits BIGINT NOT NULL,
                        created_at BIGINT NOT NULL, activated_at BIGINT, retired_at BIGINT, publish_until BIGINT)
                    """
                ]),
            Migration(
                version: 4, name: "authorization requests, codes, sessions",
                [
                    """
                    CREATE TABLE authorization_requests (
                        id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, policy TEXT NOT NULL, parameters TEXT NOT NULL,
                        csrf_hash TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,
                        completed_at BIGINT, pending_user_id TEXT, pending_email TEXT, verified_email TEXT)
                    """,
                    """
                    CREATE TABLE authorization_codes (
                        code_hash TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, client_id TEXT NOT NULL, user_id TEXT NOT NULL,
                        policy TEXT NOT NULL, redirect_uri TEXT NOT NULL, scopes TEXT NOT NULL, nonce TEXT,
                        code_challenge TEXT, code_challenge_method TEXT, auth_time BIGINT NOT NULL,
                        new_user BOOLEAN NOT NULL, identity_provider TEXT NOT NULL,
                        created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, redeemed_at BIGINT, family_id TEXT)
                    """,
                    """
                    CREATE TABLE sso_sessions (
                        id_hash TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        identity_provider TEXT NOT NULL, auth_time BIGINT NOT NULL, created_at BIGINT NOT NULL,
                        expires_at BIGINT NOT NULL)
                    """,
                ]),
            Migration(
                version: 5, name: "refresh tokens",
                [
                    """
                    CREATE TABLE refresh_token_families (
                        id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, client_id TEXT NOT NULL,
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, policy TEXT NOT NULL,
                        scopes TEXT NOT NULL, auth_time BIGINT NOT NULL, identity_provider TEXT NOT NULL,
                        created_at BIGINT NOT NULL, sliding_expires_at BIGINT, revoked_at BIGINT, revoked_reason TEXT)
                    """,
                    "CREATE INDEX refresh_token_families_user ON refresh_token_families (user_id)",
                    """
                    CREATE TABLE refresh_tokens (
                        token_hash TEXT PRIMARY KEY, family_id TEXT NOT NULL REFERENCES refresh_token_families(id) ON DELETE CASCADE,
                        created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, used_at BIGINT)
                    """,
                    "CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id)",
                ]),
            Migration(
                version: 6, name: "verification codes, outbox, simulated facebook",
                [
                    """
                    CREATE TABLE verification_codes (
                        request_id TEXT PRIMARY KEY, email_lower TEXT NOT NULL, code_hash TEXT NOT NULL,
                        attempts BIGINT NOT NULL, expires_at BIGINT NOT NULL)
                    """,
                    """
                    CREATE TABLE outbox (
                        id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, recipient TEXT NOT NULL, subject TEXT NOT NULL,
                        body TEXT NOT NULL, created_at BIGINT NOT NULL)
                    """,
                    """
                    CREATE TABLE federation_codes (
                        code_hash TEXT PRIMARY KEY, request_id TEXT NOT NULL, provider TEXT NOT NULL, subject TEXT NOT NULL,
                        email TEXT, display_name TEXT NOT NULL, given_name TEXT, surname TEXT, expires_at BIGINT NOT NULL)
                    """,
                    """
                    CREATE TABLE server_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL, created_at BIGINT NOT NULL)
                    """,
                ]),
            // Marks a replay noticed before the first redemption attached its refresh-token family.
            Migration(version: 7, name: "code replay marker", ["ALTER TABLE authorization_codes ADD COLUMN replayed_at BIGINT"]),
            // A reset code is bound to the account it was sent for (the security issue's H-1).
            Migration(version: 8, name: "verification code account", ["ALTER TABLE verification_codes ADD COLUMN user_id TEXT"]),
            // API permissions per app (the security issue's M-3); none until granted.
            Migration(
                version: 9, name: "application API permissions",
                ["ALTER TABLE applications ADD COLUMN api_permissions TEXT NOT NULL DEFAULT '[]'"]),
            // The permissions a sign-in was consented with, which bound its refreshes.
            Migration(version: 10, name: "refresh family consent", ["ALTER TABLE refresh_token_families ADD COLUMN consented TEXT"]),
            // Smart lockout per source of attempts (the security issue's L-7).
            Migration(
                version: 11, name: "lockout per source",
                [
                    """
                    CREATE TABLE lockout_sources (
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, source TEXT NOT NULL,
                        failed_attempts BIGINT NOT NULL, lockout_count BIGINT NOT NULL, locked_until BIGINT,
                        last_failed_fingerprint TEXT, PRIMARY KEY (user_id, source))
                    """
                ]),
            // Transactions per client address are bounded (the security issue's L-4).
            Migration(
                version: 12, name: "transaction client address",
                [
                    "ALTER TABLE authorization_requests ADD COLUMN client_address TEXT",
                    "CREATE INDEX authorization_requests_address ON authorization_requests (client_address, created_at)",
                ]),
            // Whether the account's email was proven (the security issue's M-7): tokens assert only
            // proven addresses. Local accounts from before cannot say, so they count as unproven
            // until a password reset (a code to the address) proves them; a federated provider
            // vouches for the address it sends.
            Migration(
                version: 13, name: "email verified",
                [
                    "ALTER TABLE users ADD COLUMN email_verified BOOLEAN NOT NULL DEFAULT FALSE",
                    "UPDATE users SET email_verified = TRUE WHERE identity_provider <> 'local'",
                ]),
            // Lockout counters of sign-in names no account has (the security issue's L-6); the
            // source "*" row is the name-wide counter. Swept a day after the last attempt.
            Migration(
                version: 14, name: "unknown name lockout",
                [
                    """
                    CREATE TABLE lockout_unknown_names (
                        tenant_id TEXT NOT NULL, name_key TEXT NOT NULL, source TEXT NOT NULL,
                        failed_attempts BIGINT NOT NULL, lockout_count BIGINT NOT NULL, locked_until BIGINT,
                        last_failed_fingerprint TEXT, updated_at BIGINT NOT NULL, PRIMARY KEY (tenant_id, name_key, source))
                    """,
                    "CREATE INDEX lockout_unknown_names_updated ON lockout_unknown_names (updated_at)",
                ]),
            // Per-app PKCE policy (SPEC §2.8): optional unless the registration requires it.
            Migration(
                version: 15, name: "require PKCE per app",
                ["ALTER TABLE applications ADD COLUMN require_pkce BOOLEAN NOT NULL DEFAULT FALSE"]),
            // The Entra face (SPEC §2.9): External ID's app-bound user flow, and the delegated
            // scopes each user consented to per app (the scope keys as JSON).
            Migration(
                version: 16, name: "app user flow and user consent",
                [
                    "ALTER TABLE applications ADD COLUMN user_flow TEXT",
                    """
                    CREATE TABLE consents (
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, client_id TEXT NOT NULL
                        REFERENCES applications(client_id) ON DELETE CASCADE, scopes TEXT NOT NULL, updated_at BIGINT NOT NULL,
                        PRIMARY KEY (user_id, client_id))
                    """,
                ]),
            // Codes and refresh tokens redeem only on the face (B2C or Entra) that issued them.
            Migration(
                version: 17, name: "grant face",
                [
                    "ALTER TABLE authorization_codes ADD COLUMN face TEXT NOT NULL DEFAULT 'b2c'",
                    "ALTER TABLE refresh_token_families ADD COLUMN face TEXT NOT NULL DEFAULT 'b2c'",
                ]),
            // Graph's account state (SPEC §2.10): accountEnabled, forceChangePasswordNextSignIn,
            // passwordPolicies.
            Migration(
                version: 18, name: "account state",
                [
                    "ALTER TABLE users ADD COLUMN account_enabled BOOLEAN NOT NULL DEFAULT TRUE",
                    "ALTER TABLE users ADD COLUMN force_password_change BOOLEAN NOT NULL DEFAULT FALSE",
                    "ALTER TABLE users ADD COLUMN password_policies TEXT",
                ]),
            // The user-flow engine's tenant-wide declarations (SPEC §2.11: custom attributes, and
            // later connectors, providers, languages) as one JSON document per tenant.
            Migration(
                version: 19, name: "tenant settings",
                ["ALTER TABLE tenants ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'"]),
            // Multi-factor authentication (SPEC §2.11): enrolled authenticators (secrets sealed),
            // each transaction's challenge, the per-account window of tries, the browsers that
            // passed a factor (`conditional`), and whether an SSO session was backed by one.
            Migration(
                version: 20, name: "second factors",
                [
                    "ALTER TABLE sso_sessions ADD COLUMN mfa BOOLEAN NOT NULL DEFAULT FALSE",
                    """
                    CREATE TABLE totp_authenticators (
                        user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE, sealed_secret TEXT NOT NULL,
                        last_step BIGINT NOT NULL, created_at BIGINT NOT NULL)
                    """,
                    """
                    CREATE TABLE mfa_challenges (
                        interaction_id TEXT PRIMARY KEY REFERENCES authorization_requests(id) ON DELETE CASCADE,
                        user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE, details TEXT NOT NULL,
                        sealed_enrolment_secret TEXT, email_code_hash TEXT, code_expires_at BIGINT, attempts BIGINT NOT NULL,
                        created_at BIGINT NOT NULL)
                    """,
                    """
                    CREATE TABLE mfa_failures (
                        user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE, tries BIGINT NOT NULL,
                        window_started_at BIGINT NOT NULL)
                    """,
                    """
                    CREATE TABLE mfa_browsers (
                        token_hash TEXT PRIMARY KEY, user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                        expires_at BIGINT NOT NULL)
                    """,
                    "CREATE INDEX mfa_browsers_expiry ON mfa_browsers (expires_at)",
                ]),
            // What a transaction proved on the way (so later pages cannot be reached around the
            // second factor), and the mail sends of a second-factor challenge (cooldown, cap).
            Migration(
                version: 21, name: "transaction proofs",
                [
                    "ALTER TABLE authorization_requests ADD COLUMN consent_session_hash TEXT",
                    "ALTER TABLE authorization_requests ADD COLUMN second_factor_user_id TEXT",
                    "ALTER TABLE mfa_challenges ADD COLUMN sends BIGINT NOT NULL DEFAULT 0",
                    "ALTER TABLE mfa_challenges ADD COLUMN last_sent_at BIGINT",
                ]),
            // Authorizations in flight at upstream OpenID Connect providers, by the hash of
            // their state (SPEC §2.11); the PKCE verifier sealed.
            Migration(
                version: 22, name: "upstream requests",
                [
                    """
                    CREATE TABLE upstream_requests (
                        state_hash TEXT PRIMARY KEY,
                        interaction_id TEXT NOT NULL REFERENCES authorization_requests(id) ON DELETE CASCADE,
                        provider TEXT NOT NULL, sealed_verifier TEXT NOT NULL, nonce TEXT NOT NULL, expires_at BIGINT NOT NULL)
                    """
                ]),
            // A first federated sign-in waiting on the sign-up attribute page (SPEC §2.11).
            Migration(
                version: 23, name: "pending federated sign-up", ["ALTER TABLE authorization_requests ADD COLUMN pending_sign_up TEXT"]),
            // The "before sending the token" connector's values, kept for the sign-in's refreshes.
            Migration(
                version: 24, name: "claim overrides",
                [
                    "ALTER TABLE authorization_codes ADD COLUMN claim_overrides TEXT",
                    "ALTER TABLE refresh_token_families ADD COLUMN claim_overrides TEXT",
                ]),
            // A rotated token's successor, sealed, for the refresh reuse interval (issue 14).
            Migration(version: 25, name: "refresh successor", ["ALTER TABLE refresh_tokens ADD COLUMN sealed_successor TEXT"]),
            // Secrets the service uses itself (the dev web app's), sealed, shared by every instance (issue 14).
            Migration(
                version: 26, name: "service secrets",
                ["CREATE TABLE service_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL, created_at BIGINT NOT NULL)"]),
            // A refresh rotation in one statement (issue 13): the UPDATE that marks a token used
            // names its successor, and this trigger inserts the successor's row within that same
            // statement, so the usual refresh holds SQLite's writer for one statement, not five.
            Migration(version: 27, name: "refresh rotation trigger") { engine in
                let columns = [
                    "ALTER TABLE refresh_tokens ADD COLUMN successor_hash TEXT",
                    "ALTER TABLE refresh_tokens ADD COLUMN successor_expires_at BIGINT",
                ]
                let insert = """
                    INSERT INTO refresh_tokens (token_hash, family_id, created_at, expires_at)
                    VALUES (NEW.successor_hash, NEW.family_id, NEW.used_at, NEW.successor_expires_at);
                    """
                switch engine {
                case .sqlite:
                    return columns + [
                        """
                        CREATE TRIGGER refresh_tokens_rotate AFTER UPDATE OF successor_hash ON refresh_tokens
                        WHEN OLD.successor_hash IS NULL AND NEW.successor_hash IS NOT NULL
                        BEGIN \(insert) END
                        """
                    ]
                case .postgres:
                    return columns + [
                        """
                        CREATE FUNCTION refresh_tokens_rotated() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
                        BEGIN \(insert) RETURN NULL; END $$
                        """,
                        """
                        CREATE TRIGGER refresh_tokens_rotate AFTER UPDATE OF successor_hash ON refresh_tokens FOR EACH ROW
                        WHEN (OLD.successor_hash IS NULL AND NEW.successor_hash IS NOT NULL) EXECUTE FUNCTION refresh_tokens_rotated()
                        """,
                    ]
                }
            },
            // The issuer an upstream request was sent to, checked when its answer comes back.
            Migration(version: 28, name: "upstream request issuer", ["ALTER TABLE upstream_requests ADD COLUMN issuer TEXT"]),
            // Verification codes sent and wrong codes tried per address, across transactions.
            Migration(
                version: 29, name: "code limits",
                [
                    """
                    CREATE TABLE code_limits (
                        tenant_id TEXT NOT NULL, email_lower TEXT NOT NULL, window_started_at BIGINT NOT NULL,
                        sends BIGINT NOT NULL, wrong BIGINT NOT NULL, PRIMARY KEY (tenant_id, email_lower))
                    """
                ]),
            // The look-alike key of local accounts' names (F-7), unique per tenant; accounts from
            // before get theirs at start (``IdentityServer/migrate(_:logger:)``).
            Migration(
                version: 30, name: "sign-in skeletons",
                [
                    "ALTER TABLE users ADD COLUMN sign_in_skeleton TEXT",
                    "CREATE UNIQUE INDEX users_tenant_skeleton ON users (tenant_id, sign_in_skeleton)",
                ]),
            // A sign-in's progress as one typed value, its journey (``JourneyState``), instead of
            // six nullable columns; the revision makes each save conditional on the one read.
            // Sign-ins under way at the upgrade start their journey again.
            Migration(
                version: 31, name: "journey state",
                [
                    "ALTER TABLE authorization_requests ADD COLUMN journey TEXT",
                    "ALTER TABLE authorization_requests ADD COLUMN journey_revision BIGINT NOT NULL DEFAULT 0",
                    "ALTER TABLE authorization_requests DROP COLUMN pending_user_id",
                    "ALTER TABLE authorization_requests DROP COLUMN pending_email",
                    "ALTER TABLE authorization_requests DROP COLUMN verified_email",
                    "ALTER TABLE authorization_requests DROP COLUMN consent_session_hash",
                    "ALTER TABLE authorization_requests DROP COLUMN second_factor_user_id",
                    "ALTER TABLE authorization_requests DROP COLUMN pending_sign_up",
                ]),
        ] + policyMigrations + activityMigrations)
}

extension IdentityMigrations {
    /// Gives local accounts made before migration 30 their ``ConfusableSkeleton`` (a function of
    /// Swift's, not SQL's). Two old accounts that already look alike both stay; the second keeps
    /// none, and is logged for the operator.
    package static func fillSkeletons(_ database: any Database, logger: Logger) async throws {
        let missing = try await database.rows(
            // Oldest first: of two accounts that already looked alike, the older keeps the name.
            "SELECT id, sign_in_name FROM users WHERE identity_provider = ? AND sign_in_skeleton IS NULL ORDER BY created_at, id",
            [.text("local")])
        for row in missing {
            let id = try row.text("id")
            let skeleton = ConfusableSkeleton.of(try row.text("sign_in_name"))
            do {
                try await database.transaction { sql in
                    try await sql.update("users").set("sign_in_skeleton", to: skeleton).where("id", .equal, id).run()
                }
            } catch  where database.isUniqueViolation(error) {
                logger.warning("an account's name looks like another's", metadata: ["oid": "\(id)"])
            }
        }
    }
}
