import Testing
import HummingbirdTesting
@testable import IdentityServer
@Test func smoke() {}
