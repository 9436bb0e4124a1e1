// Varlink messages are JSON: whoever speaks Varlink gets the JSON values with it.
@_exported import AdorchJSON
