import Hummingbird
import UserJourneys

extension AdminConsole {
    /// The console's routes: its pages are GETs, every change a form POST (``posting(_:context:_:)``).
    func addRoutes(to router: Router<IdentityRequestContext>) {
        let console = self
        router.get("admin") { request, context in
            try await console.page(request, context: context) { _ in Response(status: .seeOther, headers: [.location: "/admin/users"]) }
        }
        router.get("admin/console.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "max-age=300"],
                body: .init(byteBuffer: ByteBuffer(string: console.pages.stylesheet)))
        }
        router.get("admin/signin", use: signedIn)
        router.post("admin/signout", use: signOut)
        router.get("admin/users", use: users)
        router.post("admin/users", use: createUser)
        router.get("admin/users/:id", use: user)
        router.post("admin/users/:id/:action", use: userAction)
        router.get("admin/sign-ins", use: signIns)
        router.get("admin/sign-ins/:id", use: signIn)
        router.get("admin/audit", use: audits)
        router.get("admin/flows", use: flows)
        router.get("admin/run", use: run)
        router.post("admin/run", use: ran)
        router.get("admin/apps", use: apps)
        router.post("admin/apps", use: createApp)
        router.get("admin/apps/:id", use: app)
        router.post("admin/apps/:id/:action", use: appAction)
        router.get("admin/keys", use: keys)
        router.post("admin/keys/rotate", use: rotateKey)
        router.post("admin/keysets", use: createKeySet)
        router.post("admin/keysets/:id/generate", use: generateKey)
        router.post("admin/policies", use: uploadPolicy)
    }
}
