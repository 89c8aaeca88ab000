import Foundation

/// The hosted pages' languages (SPEC §2.11): `ui_locales` picks one of the tenant's declared
/// languages (its first tag whose primary language is declared), else the tenant's first; every
/// string comes from the built-in catalogue of that language, falls back to English, and a
/// tenant's per-string overrides win (B2C's "language customization").
package enum PageLanguage {
    /// Languages with a built-in catalogue.
    package static let builtIn = ["en", "es"]

    /// The language for a transaction's `ui_locales` among `declared` (English when none are).
    package static func pick(uiLocales: String?, declared: [String]) -> String {
        let languages = declared.isEmpty ? ["en"] : declared
        for tag in (uiLocales ?? "").split(separator: " ") {
            let primary = tag.split(separator: "-").first.map { $0.lowercased() } ?? ""
            if let match = languages.first(where: { $0.lowercased() == primary }) { return match }
        }
        return languages[0]
    }

    /// The strings of `language` for `tenant`: English, the language's catalogue over it, the
    /// tenant's overrides over both.
    package static func strings(_ language: String, tenant: Tenant?) -> [String: String] {
        var strings = english
        if language != "en", let catalogue = catalogues[language] { strings.merge(catalogue) { _, new in new } }
        if let overrides = tenant?.localizedStrings[language] { strings.merge(overrides) { _, new in new } }
        return strings
    }

    static let catalogues: [String: [String: String]] = ["en": english, "es": spanish]

    package static let english: [String: String] = [
        "email": "Email address", "password": "Password", "newPassword": "New password", "confirmPassword": "Confirm new password",
        "passwordRules": "8 to 64 characters, with at least 3 of: lowercase, uppercase, digit, symbol.", "cancel": "Cancel",
        "continue": "Continue", "verificationCode": "Verification code", "sendCode": "Send verification code",
        "verifyCode": "Verify code", "sendNewCode": "Send new code", "changeEmail": "Change e-mail",
        "outboxNote": "No mail leaves this machine: see the", "outbox": "outbox", "signedInAs": "Signed in as",
        "signin_title": "Sign in", "signin_forgot": "Forgot your password?", "signin_submit": "Sign in",
        "signin_noAccount": "Don't have an account?", "signin_signUpNow": "Sign up now", "signin_orWith": "Or sign in with",
        "signin_with": "Sign in with",
        "signup_title": "Create your account",
        "signup_emailHint": "We send a verification code to this address before the account is created.",
        "signup_codeSent": "Verification code has been sent to your inbox:", "signup_copyCode": "Please copy it to the input box below.",
        "signup_verified": "E-mail address verified. You can now continue.", "signup_create": "Create",
        "signup_haveAccount": "Already have an account?", "signup_signIn": "Sign in",
        "reset_title": "Reset your password", "reset_codeSent": "Verification code has been sent to",
        "reset_copyCode": "Copy it to the input box below.", "reset_verified": "E-mail address verified:",
        "changepassword_title": "Change your password",
        "changepassword_intro": "You must change your password before you continue. Signed in as",
        "profile_title": "Edit your profile", "profile_save": "Save",
        "mfa_enrolTitle": "Set up your authenticator app", "mfa_codeTitle": "Enter your verification code",
        "mfa_emailTitle": "Verify it's you",
        "mfa_scan":
            "Scan this QR code with your authenticator app (Microsoft Authenticator, Google Authenticator, or any app for time-based codes), then enter the 6-digit code it shows.",
        "mfa_cantScan": "Can't scan it? Enter this key in the app:", "mfa_openLink": "Open in an authenticator app on this device",
        "mfa_enterCode": "Enter the 6-digit code from your authenticator app for", "mfa_verify": "Verify",
        "mfa_emailIntro": "We need to verify it's you. We'll send a code to", "mfa_emailSent": "Verification code has been sent to",
        "consent_title": "Permissions requested", "consent_wants": "wants to:",
        "consent_accepting": "Accepting lets this app use these permissions for you until you remove them.",
        "consent_accept": "Accept",
        "accounts_title": "Pick an account", "accounts_choose": "Choose the account to continue with.",
        "accounts_other": "Use another account",
        "oob_title": "Your sign-in code", "oob_copy": "Copy this code into the application:",
        "oob_once": "It can be used once and expires in 10 minutes.",
        "blocked_title": "Sorry, you cannot continue",
        "error_credentials": "Your password is incorrect, or we can't seem to find your account.",
        "error_passwordMismatch":
            "The password entry fields do not match. Please enter the same password in both fields and try again.",
        "error_codeMismatch":
            "The verification code you have entered does not match our records. Please try again, or request a new code.",
        // B2C's messages for its throttled verification (AADB2C90229 in its logs).
        "error_throttled": "There are too many requests at this moment. Please wait for some time and try again.",
        "error_tooManyCodes": "You've made too many incorrect attempts. Please try again later.",
        "error_email": "Please enter a valid email address.", "error_displayName": "Please enter a display name.",
        "error_exists": "A user with the specified ID already exists. Please choose a different one.",
        "attribute_displayName": "Display name", "attribute_givenName": "Given name", "attribute_surname": "Surname",
        "attribute_city": "City", "attribute_country": "Country/Region", "attribute_postalCode": "Postal code",
        "attribute_jobTitle": "Job title", "attribute_streetAddress": "Street address", "attribute_state": "State/Province",
    ]

    static let spanish: [String: String] = [
        "email": "Dirección de correo electrónico", "password": "Contraseña", "newPassword": "Nueva contraseña",
        "confirmPassword": "Confirmar la nueva contraseña",
        "passwordRules": "De 8 a 64 caracteres, con al menos 3 de: minúsculas, mayúsculas, dígitos, símbolos.", "cancel": "Cancelar",
        "continue": "Continuar", "verificationCode": "Código de verificación", "sendCode": "Enviar código de verificación",
        "verifyCode": "Verificar código", "sendNewCode": "Enviar código nuevo", "changeEmail": "Cambiar correo electrónico",
        "outboxNote": "Ningún correo sale de este equipo: consulte la", "outbox": "bandeja de salida", "signedInAs": "Sesión iniciada como",
        "signin_title": "Iniciar sesión", "signin_forgot": "¿Olvidó su contraseña?", "signin_submit": "Iniciar sesión",
        "signin_noAccount": "¿No tiene una cuenta?", "signin_signUpNow": "Regístrese ahora", "signin_orWith": "O inicie sesión con",
        "signin_with": "Iniciar sesión con",
        "signup_title": "Cree su cuenta",
        "signup_emailHint": "Enviamos un código de verificación a esta dirección antes de crear la cuenta.",
        "signup_codeSent": "Se ha enviado un código de verificación a su bandeja de entrada:",
        "signup_copyCode": "Cópielo en el cuadro de abajo.",
        "signup_verified": "Dirección de correo verificada. Ya puede continuar.", "signup_create": "Crear",
        "signup_haveAccount": "¿Ya tiene una cuenta?", "signup_signIn": "Iniciar sesión",
        "reset_title": "Restablecer la contraseña", "reset_codeSent": "Se ha enviado un código de verificación a",
        "reset_copyCode": "Cópielo en el cuadro de abajo.", "reset_verified": "Dirección de correo verificada:",
        "changepassword_title": "Cambie su contraseña",
        "changepassword_intro": "Debe cambiar la contraseña antes de continuar. Sesión iniciada como",
        "profile_title": "Editar su perfil", "profile_save": "Guardar",
        "mfa_enrolTitle": "Configure su aplicación de autenticación", "mfa_codeTitle": "Escriba su código de verificación",
        "mfa_emailTitle": "Verifique que es usted",
        "mfa_scan":
            "Escanee este código QR con su aplicación de autenticación (Microsoft Authenticator, Google Authenticator o cualquier aplicación de códigos basados en el tiempo) y escriba el código de 6 dígitos que muestre.",
        "mfa_cantScan": "¿No puede escanearlo? Escriba esta clave en la aplicación:",
        "mfa_openLink": "Abrir en una aplicación de autenticación de este dispositivo",
        "mfa_enterCode": "Escriba el código de 6 dígitos de su aplicación de autenticación para", "mfa_verify": "Verificar",
        "mfa_emailIntro": "Necesitamos comprobar que es usted. Enviaremos un código a",
        "mfa_emailSent": "Se ha enviado un código de verificación a",
        "consent_title": "Permisos solicitados", "consent_wants": "quiere:",
        "consent_accepting": "Si acepta, esta aplicación podrá usar estos permisos en su nombre hasta que los retire.",
        "consent_accept": "Aceptar",
        "accounts_title": "Elija una cuenta", "accounts_choose": "Elija la cuenta con la que continuar.",
        "accounts_other": "Usar otra cuenta",
        "oob_title": "Su código de inicio de sesión", "oob_copy": "Copie este código en la aplicación:",
        "oob_once": "Se puede usar una vez y caduca en 10 minutos.",
        "blocked_title": "Lo sentimos, no puede continuar",
        "error_credentials": "La contraseña no es correcta o no encontramos su cuenta.",
        "error_passwordMismatch":
            "Los campos de contraseña no coinciden. Escriba la misma contraseña en ambos campos e inténtelo de nuevo.",
        "error_codeMismatch":
            "El código de verificación que ha escrito no coincide con nuestros registros. Inténtelo de nuevo o solicite un código nuevo.",
        "error_throttled": "Hay demasiadas solicitudes en este momento. Espere un poco e inténtelo de nuevo.",
        "error_tooManyCodes": "Ha realizado demasiados intentos incorrectos. Inténtelo de nuevo más tarde.",
        "error_email": "Escriba una dirección de correo electrónico válida.", "error_displayName": "Escriba un nombre para mostrar.",
        "error_exists": "Ya existe un usuario con el identificador especificado. Elija otro.",
        "attribute_displayName": "Nombre para mostrar", "attribute_givenName": "Nombre", "attribute_surname": "Apellidos",
        "attribute_city": "Ciudad", "attribute_country": "País o región", "attribute_postalCode": "Código postal",
        "attribute_jobTitle": "Puesto", "attribute_streetAddress": "Dirección", "attribute_state": "Estado o provincia",
    ]
}
