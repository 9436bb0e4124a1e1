// swift-tools-version:6.0
import PackageDescription

// An app of its own that uses the AdorchClient library from this repository by path; another
// repository would name it by URL instead:
//   .package(url: "https://github.com/OWNER/adorch", branch: "main")
let package = Package(
    name: "adorch-swift-example",
    dependencies: [.package(name: "adorch", path: "../..")],
    targets: [
        .executableTarget(name: "rewarded-ad", dependencies: [.product(name: "AdorchClient", package: "adorch")]),
    ]
)
