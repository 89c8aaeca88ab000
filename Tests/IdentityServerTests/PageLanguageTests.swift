import Foundation
@testable import IdentityDirectory
import Testing

@testable import IdentityServer
@testable import UserJourneys

/// The pages' languages (SPEC §2.11): `ui_locales` picks among the tenant's declared languages,
/// English by default; a tenant's per-string overrides win; the dev tenant ships English and
/// Spanish.
@Suite("Page languages")
struct PageLanguageTests {
    @Test("ui_locales=es gives Spanish pages and errors; an undeclared language gives the default; overrides win")
    func spanish() async throws {
        try await IdentityHarness.run(.sqlite) { h, driver in
            _ = try await h.addUser("ana@example.com")
            var attempt = AuthorizationAttempt(harness: h)
            attempt.extra = [("ui_locales", "fr-FR es-MX")]
            let page = try await driver.start(attempt, harness: h)
            #expect(page.text.contains("<html lang=\"es\">"))
            #expect(page.text.contains("<title>Iniciar sesión · TodoB2C</title>"))
            #expect(page.text.contains("¿Olvidó su contraseña?") && page.text.contains("Regístrese ahora"))
            let wrong = try await driver.submit(page, [("email", "ana@example.com"), ("password", "Wrong-Pass1")])
            #expect(wrong.text.contains("La contraseña no es correcta o no encontramos su cuenta."))

            var french = AuthorizationAttempt(harness: h)
            french.extra = [("ui_locales", "fr")]
            let english = try await driver.start(french, harness: h)
            #expect(english.text.contains("<html lang=\"en\">") && english.text.contains("Forgot your password?"))

            // The sign-up page's attribute labels are translated too.
            let signUp = try await driver.follow(try await driver.get(try #require(page.link(id: "createAccount"))))
            #expect(signUp.text.contains("Enviar código de verificación"))

            var tenant = try #require(try await h.server.tenants.tenant(matching: h.tenant.guid))
            #expect(tenant.languages == ["en", "es"])
            tenant.localizedStrings = ["es": ["signin_submit": "Entrar"]]
            try await h.server.tenants.save(tenant, now: Date())
            let overridden = try await driver.start(attempt, harness: h)
            #expect(overridden.text.contains("id=\"next\">Entrar</button>"))
        }
    }

    @Test("the language is the first ui_locales tag whose primary language is declared, else the first declared")
    func picking() {
        #expect(PageLanguage.pick(uiLocales: "es-ES", declared: ["en", "es"]) == "es")
        #expect(PageLanguage.pick(uiLocales: "ko es", declared: ["en", "es", "ko"]) == "ko")
        #expect(PageLanguage.pick(uiLocales: "de", declared: ["es", "en"]) == "es")
        #expect(PageLanguage.pick(uiLocales: nil, declared: []) == "en")
        // ui_locales is kept only as checked BCP 47 tags (letters, digits, hyphens; five at most).
        #expect(AuthorizeEndpoint.uiLocales("es-MX <b>x</b> en") == "es-MX en")
        #expect(AuthorizeEndpoint.uiLocales("\u{202E}es") == nil && AuthorizeEndpoint.uiLocales(nil) == nil)
        #expect(AuthorizeEndpoint.uiLocales("a b c d e f g") == "a b c d e")
        // Every built-in catalogue has every English key.
        for (language, catalogue) in PageLanguage.catalogues {
            #expect(Set(catalogue.keys) == Set(PageLanguage.english.keys), "\(language)")
        }
    }

    @Test("a declaration's languages and overrides are checked")
    func declaration() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("languages-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bad = directory.appendingPathComponent("bad.yaml")
        try """
        tenant: { name: contoso.onmicrosoft.com }
        languages: [en, Spanish]
        localizedStrings: { ko: { signin_submit: 로그인 }, en: { no_such_key: x } }
        userFlows: [{ name: B2C_1_susi, type: signUpOrSignIn }]
        """.write(to: bad, atomically: true, encoding: .utf8)
        do {
            _ = try TenantDeclaration.load(path: bad.path)
            Issue.record("accepted")
        } catch let error as TenantDeclaration.DeclarationError {
            #expect(error.description.contains("language 'Spanish' must be"))
            #expect(error.description.contains("localizedStrings: 'ko' is not one of the languages"))
            #expect(error.description.contains("no page string 'no_such_key'"))
        }
    }
}
