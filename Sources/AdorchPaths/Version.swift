/// The release: adorchd's status and journal, adorchctl's --version and the build_info metric.
/// Here, beside the paths, so that adorchctl tells it without linking the daemon.
public enum AdorchVersion {
    public static let current = "0.1.0"
}
