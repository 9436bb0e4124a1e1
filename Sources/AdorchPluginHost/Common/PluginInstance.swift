import AdorchEngine
import Dispatch

/// A plugin the daemon drives: dlopened into the daemon (LoadedPlugin) or into a host
/// process of its own (PluginProcess). The engine's effects call these, from the engine
/// queue; completions come from the plugin's threads.
public protocol PluginInstance: AnyObject, Sendable {
    var info: PluginInfo { get }
    func load(_ order: LoadOrder)
    func show(_ id: AdID, userID: String?, timeout: DispatchTimeInterval?, completion: @escaping @Sendable (Bool) -> Void)
    func withdrawShow(_ id: AdID)
    func notify(_ id: AdID, event: ViewerEvent)
    func control(_ id: AdID, _ control: SessionControl)
    /// ADORCH_EVENT_LOSS before the ad's destroy: why a bidder's ad ends unshown.
    func lose(_ id: AdID, _ loss: AuctionLoss)
    func destroy(_ id: AdID)
    func stats(timeout: DispatchTimeInterval, completion: @escaping @Sendable (String?) -> Void)
    @discardableResult func shutdown(timeout: DispatchTimeInterval) -> Bool
}

extension PluginInstance {
    public func show(_ id: AdID, userID: String?, completion: @escaping @Sendable (Bool) -> Void) {
        show(id, userID: userID, timeout: nil, completion: completion)
    }

    @discardableResult public func shutdown() -> Bool { shutdown(timeout: .seconds(5)) }
}

extension LoadedPlugin: PluginInstance {}
