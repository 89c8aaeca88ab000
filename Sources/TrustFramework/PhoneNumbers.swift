import Foundation

/// Phone numbers as B2C's phone number claims transformations read them
/// (`phone-number-claims-transformations.md`): an international number is `+`, a country calling
/// code (ITU-T E.164, prefix-free, one to three digits) and the national number; the standard
/// form B2C stores is `+` and the digits. Validation is as lenient as B2C's examples show it
/// (`+1 (123) 456-7890` is valid): spaces, hyphens, dots, slashes and parentheses are dropped,
/// anything else refuses the number, and the whole is at most 15 digits (E.164 §6.1).
package enum PhoneNumbers {
    /// Country calling codes and the region B2C names for each (ISO 3166-1 alpha-2): the first
    /// listed is the code's main region (`+1` is `US`, `+7` is `RU`, `+44` is `GB`).
    static let regions: [(code: String, regions: [String])] = {
        let table = """
            1 US CA PR DO JM TT BS BB AG DM GD KN LC VC AI BM KY MS TC VG VI GU MP AS SX
            7 RU KZ
            20 EG 27 ZA 30 GR 31 NL 32 BE 33 FR 34 ES 36 HU 39 IT 40 RO 41 CH 43 AT 44 GB GG JE IM 45 DK 46 SE 47 NO SJ 48 PL 49 DE
            51 PE 52 MX 53 CU 54 AR 55 BR 56 CL 57 CO 58 VE 60 MY 61 AU CX CC 62 ID 63 PH 64 NZ 65 SG 66 TH
            81 JP 82 KR 84 VN 86 CN 90 TR 91 IN 92 PK 93 AF 94 LK 95 MM 98 IR
            211 SS 212 MA EH 213 DZ 216 TN 218 LY 220 GM 221 SN 222 MR 223 ML 224 GN 225 CI 226 BF 227 NE 228 TG 229 BJ
            230 MU 231 LR 232 SL 233 GH 234 NG 235 TD 236 CF 237 CM 238 CV 239 ST 240 GQ 241 GA 242 CG 243 CD 244 AO
            245 GW 246 IO 248 SC 249 SD 250 RW 251 ET 252 SO 253 DJ 254 KE 255 TZ 256 UG 257 BI 258 MZ 260 ZM 261 MG
            262 RE YT 263 ZW 264 NA 265 MW 266 LS 267 BW 268 SZ 269 KM 290 SH 291 ER 297 AW 298 FO 299 GL
            350 GI 351 PT 352 LU 353 IE 354 IS 355 AL 356 MT 357 CY 358 FI AX 359 BG 370 LT 371 LV 372 EE 373 MD 374 AM
            375 BY 376 AD 377 MC 378 SM 379 VA 380 UA 381 RS 382 ME 383 XK 385 HR 386 SI 387 BA 389 MK 420 CZ 421 SK 423 LI
            500 FK 501 BZ 502 GT 503 SV 504 HN 505 NI 506 CR 507 PA 508 PM 509 HT 590 GP BL MF 591 BO 592 GY 593 EC
            594 GF 595 PY 596 MQ 597 SR 598 UY 599 CW BQ
            670 TL 672 NF 673 BN 674 NR 675 PG 676 TO 677 SB 678 VU 679 FJ 680 PW 681 WF 682 CK 683 NU 685 WS 686 KI
            687 NC 688 TV 689 PF 690 TK 691 FM 692 MH
            850 KP 852 HK 853 MO 855 KH 856 LA 880 BD 886 TW
            960 MV 961 LB 962 JO 963 SY 964 IQ 965 KW 966 SA 967 YE 968 OM 970 PS 971 AE 972 IL 973 BH 974 QA 975 BT
            976 MN 977 NP 992 TJ 993 TM 994 AZ 995 GE 996 KG 998 UZ
            """
        var entries: [(code: String, regions: [String])] = []
        for token in table.split(whereSeparator: \.isWhitespace).map(String.init) {
            if token.allSatisfy(\.isNumber) { entries.append((token, [])) } else { entries[entries.count - 1].regions.append(token) }
        }
        return entries
    }()

    static let codeRegions: [String: [String]] = Dictionary(uniqueKeysWithValues: regions.map { ($0.code, $0.regions) })
    static let regionCodes: [String: String] = {
        var codes: [String: String] = [:]
        for entry in regions { for region in entry.regions where codes[region] == nil { codes[region] = entry.code } }
        return codes
    }()

    /// The digits of `text` once B2C's formatting characters are dropped, and whether it began
    /// with `+`; nil when anything else is in it.
    static func digits(_ text: String) -> (digits: String, international: Bool)? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.count <= 64 else { return nil }
        let international = trimmed.hasPrefix("+")
        var digits = ""
        for character in international ? trimmed.dropFirst() : Substring(trimmed) {
            if character.isASCII, character.isNumber {
                digits.append(character)
            } else if !" -.()/".contains(character) {
                return nil
            }
        }
        return (digits, international)
    }

    /// An international number split into its calling code and national number, or nil when it
    /// is not one: no `+`, no assigned calling code, or a national number shorter than 4 digits
    /// or a whole longer than 15.
    package static func split(_ text: String) -> (callingCode: String, nationalNumber: String)? {
        guard let (digits, international) = digits(text), international, (5...15).contains(digits.count) else { return nil }
        for length in 1...3 where digits.count > length {
            let code = String(digits.prefix(length))
            if codeRegions[code] != nil {
                let national = String(digits.dropFirst(length))
                return national.count >= 4 ? (code, national) : nil
            }
        }
        return nil
    }

    /// `ConvertStringToPhoneNumberClaim`: the standard form (`+` and the digits) of an
    /// international number, or of a national one in `country` (ISO 3166 alpha-2), kept as typed
    /// (B2C's example: `033 456-7890` in DK is `+450334567890`); nil when it is not valid.
    package static func standard(_ text: String, country: String? = nil) -> String? {
        if let country, !country.isEmpty, let (digits, international) = digits(text), !international {
            guard let code = regionCodes[country.uppercased()], digits.count >= 4, code.count + digits.count <= 15 else { return nil }
            return "+" + code + digits
        }
        return split(text).map { "+" + $0.callingCode + $0.nationalNumber }
    }

    /// The main region (ISO 3166 alpha-2) of a calling code.
    package static func region(ofCallingCode code: String) -> String? { codeRegions[code]?.first }
}

extension PhoneNumbers {
    /// The phone number claims transformations, with the reference's claim names
    /// (`ConvertStringToPhoneNumberClaim` takes `phoneNumberString`, or `inputClaim` as the
    /// reference first named it).
    static func evaluate(_ method: String, _ io: TransformationIO, _ claims: PolicyClaims) throws(ClaimsTransformationFailure) -> [(
        String, PolicyClaimValue?
    )] {
        switch method {
        case "ConvertPhoneNumberClaimToString": return [("phoneNumberString", io.value("phoneNumber", claims).map { .string($0.text) })]
        case "ConvertStringToPhoneNumberClaim":
            let input = io.reference("phoneNumberString") != nil ? "phoneNumberString" : "inputClaim"
            let country = io.reference("country") != nil ? io.text("country", claims) : nil
            guard let number = standard(io.text(input, claims), country: country) else {
                throw .assertion(
                    messageKey: "UserMessageIfClaimsTransformationInvalidPhoneNumber", defaultMessage: "The phone number you provided is not valid.")
            }
            return [("outputClaim", .string(number))]
        case "GetNationalNumberAndCountryCodeFromPhoneNumberString":
            guard let (code, national) = split(io.text("phoneNumber", claims)) else {
                if io.flag("throwExceptionOnFailure") {
                    throw .assertion(
                        messageKey: "UserMessageIfPhoneNumberParseFailure", defaultMessage: "The phone number you provided is not valid.")
                }
                // Not valid and no exception asked for: the outputs are left as they were.
                return []
            }
            let region = io.parameter("countryCodeType")?.uppercased() == "ISO3166"
            return [("nationalNumber", .string(national)), ("countryCode", .string(region ? (self.region(ofCallingCode: code) ?? "") : "+" + code))]
        default: throw .invalidInput("The claims transformation method '\(method)' is not supported by this service.")
        }
    }
}
