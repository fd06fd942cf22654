"""τ² telecom, the user's side: a simulated phone (`device`) and its world (`surroundings`).

The user's tools read and change the phone of `user_db.toml` and answer in τ²'s words, status bar
included; after every change that touches the radio the phone searches the network again, which
picks the technology and signal the preferred mode and the surroundings allow. The carrier's
side reaches the phone only through `sync` (line active, roaming allowed, data used up, payment
requests), as τ²'s environment syncs its two sides after every call.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Mapping

from toolorch_jax.envs.tau2.db import Database
from toolorch_jax.envs.tau2.shared import STRING, described, enum, obj
from toolorch_jax.envs.tau2.telecom.carrier import Carrier
from toolorch_jax.envs.tau2.toolkit import DomainTool

MODES = ("4g_5g_preferred", "4g_only", "3g_only", "2g_only")
MODE_TECHNOLOGY = {"4g_only": "4G", "3g_only": "3G", "2g_only": "2G"}
DEFAULT_APN = {"apn_name": "internet", "reset_at_reboot": False, "mms_apn": "mms",
               "mmsc_url": "http://mms.carrier.com/mms/wapenc", "mms_proxy": None,
               "mms_port": None}
NO_PERMISSIONS = {"sms": False, "storage": False, "phone": False, "network": False}
DEFAULT_DEVICE = {
    "sim_card_status": "active", "sim_card_missing": False, "airplane_mode": False,
    "network_signal_strength": "good", "network_technology_connected": "5G",
    "network_connection_status": "connected", "battery_level": 80, "data_enabled": True,
    "roaming_enabled": False, "network_mode_preference": "4g_5g_preferred",
    "active_apn_settings": DEFAULT_APN, "wifi_enabled": False, "wifi_connected": False,
    "wifi_ssid": None, "wifi_signal_strength": "none", "wifi_calling_enabled": False,
    "wifi_calling_mms_over_wifi": False, "data_saver_mode": False, "vpn_enabled_setting": False,
    "vpn_connected": False, "vpn_details": None,
    "app_statuses": {
        "messaging": {"app_name": "messaging",
                      "permissions": {**NO_PERMISSIONS, "sms": True, "storage": True,
                                      "phone": True}},
        "browser": {"app_name": "browser",
                    "permissions": {**NO_PERMISSIONS, "network": True, "storage": True}}}}
DEFAULT_SURROUNDINGS = {
    "name": None, "phone_number": None, "is_abroad": False, "roaming_allowed": False,
    "signal_strength": {"2G": "poor", "3G": "fair", "4G": "good", "5G": "excellent"},
    "mobile_data_usage_exceeded": False, "line_active": True, "payment_request": None}
DEFAULT_VPN = {"server_address": "192.168.1.1", "protocol": "OpenVPN",
               "server_performance": "excellent"}
SIGNAL_ICONS = {"none": "\U0001f4f5 No Signal", "poor": "\U0001f4f6\u00b9 Poor",
                "fair": "\U0001f4f6\u00b2 Fair", "good": "\U0001f4f6\u00b3 Good",
                "excellent": "\U0001f4f6\u2074 Excellent"}
SPEED_RANGES = {"2G": (0.1, 0.4), "3G": (1.0, 5.0), "4G": (10.0, 100.0), "5G": (50.0, 500.0),
                "none": (0.0, 0.0)}
SIGNAL_FACTORS = {"poor": 0.2, "fair": 0.5, "good": 0.8, "excellent": 1.0, "none": 0.0}
SPEED_ADVICE = {
    "Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
    "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
    "Fair": "Connection is okay for web browsing and some standard definition streaming.",
    "Good": "Connection is good for most activities, including HD streaming.",
    "Excellent": "Connection is very fast."}
SIM_TEXTS = {"active": "Your SIM card is active and working.",
             "missing": "No SIM card detected in the phone.",
             "locked_pin": "The SIM card is locked with a PIN code.",
             "locked_puk": "The SIM card is locked with a PUK code."}


def _fill(target: dict[str, Any], defaults: Mapping[str, Any]) -> None:
  """Missing keys from `defaults`, nested objects filled key by key."""
  for key, value in defaults.items():
    if key not in target:
      target[key] = copy.deepcopy(value)
    elif isinstance(value, dict) and isinstance(target[key], dict):
      _fill(target[key], value)


def prepare_user(data: dict[str, Any]) -> None:
  """Every field of τ²'s phone and surroundings models, defaults filled in."""
  device = data.setdefault("device", {})
  _fill(device, {key: value for key, value in DEFAULT_DEVICE.items() if key != "app_statuses"})
  device.setdefault("app_statuses", copy.deepcopy(DEFAULT_DEVICE["app_statuses"]))
  for name, app in device["app_statuses"].items():
    app.setdefault("app_name", name)
    _fill(app.setdefault("permissions", {}), NO_PERMISSIONS)
  _fill(data.setdefault("surroundings", {}), DEFAULT_SURROUNDINGS)


class Phone:
  """The phone's behaviour over the user's db; every method mirrors one of τ²'s."""

  def __init__(self, db: Database):
    self.device = db.data["device"]
    self.world = db.data["surroundings"]

  # ------------------------------------------------------------------ reading
  def sim_status(self) -> str:
    return "missing" if self.device["sim_card_missing"] else self.device["sim_card_status"]

  def status_bar(self) -> str:
    d, parts = self.device, []
    if d["airplane_mode"]:
      parts.append("\u2708\ufe0f Airplane Mode")
    else:
      parts.append(SIGNAL_ICONS.get(d["network_signal_strength"], SIGNAL_ICONS["none"]))
      if d["network_technology_connected"] != "none":
        parts.append(d["network_technology_connected"])
      if d["data_enabled"] and d["network_technology_connected"] != "none":
        parts.append("\U0001f4f1 Data Enabled")
        if d["data_saver_mode"]:
          parts.append("\U0001f53d Data Saver")
      else:
        parts.append("\U0001f4f5 Data Disabled")
    if d["wifi_enabled"] and d["wifi_connected"]:
      parts.append(f"\U0001f4e1 Connected to {d['wifi_ssid']}" if d["wifi_ssid"]
                   else "\U0001f4e1 Enabled")
    if d["vpn_connected"]:
      parts.append("\U0001f512 VPN Connected")
    parts.append(f"\U0001f50b {d['battery_level']}%")
    return " | ".join(parts)

  def with_status(self, update: str) -> str:
    return f"{update}\nStatus Bar: {self.status_bar()}"

  def mobile_data_working(self) -> bool:
    d, world = self.device, self.world
    if d["airplane_mode"] or d["network_signal_strength"] == "none":
      return False
    if d["network_connection_status"] == "no_service":
      return False
    if world["is_abroad"] and (not d["roaming_enabled"] or not world["roaming_allowed"]):
      return False
    return bool(d["data_enabled"]) and not world["mobile_data_usage_exceeded"]

  def speed(self) -> tuple[float | None, str]:
    if not self.mobile_data_working():
      return None, "No Connection"
    d = self.device
    factor = 1.0
    if (d["vpn_connected"] and d["vpn_details"]
        and d["vpn_details"]["server_performance"] == "poor"):
      factor = 0.1
    if d["data_saver_mode"]:
      factor *= 0.2
    low, high = SPEED_RANGES.get(d["network_technology_connected"], (0.0, 0.0))
    speed = round((low + high) / 2.0 * SIGNAL_FACTORS.get(d["network_signal_strength"], 0.0)
                  * factor, 2)
    for limit, description in ((1, "Very Poor"), (5, "Poor"), (25, "Fair"), (100, "Good")):
      if speed < limit:
        return speed, description
    return speed, "Excellent"

  def can_send_mms(self) -> bool:
    d = self.device
    if not self.mobile_data_working() or d["network_technology_connected"] == "2G":
      return False
    if d["wifi_calling_enabled"] and d["wifi_calling_mms_over_wifi"]:
      return False
    if d["active_apn_settings"]["mmsc_url"] is None:
      return False
    messaging = d["app_statuses"].get("messaging")
    return bool(messaging and messaging["permissions"]["storage"]
                and messaging["permissions"]["sms"])

  # ------------------------------------------------------------------ changing
  def search_network(self) -> None:
    """τ²'s `simulate_network_search`: connect on the preferred mode, unless something blocks."""
    d, signals = self.device, self.world["signal_strength"]
    if self.sim_status() == "active":
      d["network_connection_status"] = "connected"
      mode = d["network_mode_preference"]
      if mode == "4g_5g_preferred" and signals.get("5G", "none") != "none":
        d["network_technology_connected"] = "5G"
      else:
        d["network_technology_connected"] = MODE_TECHNOLOGY.get(mode, "4G")
      d["network_signal_strength"] = signals.get(d["network_technology_connected"], "none")
      blocked = False
    else:
      blocked = True
    blocked = (blocked or d["airplane_mode"]
               or d["active_apn_settings"]["apn_name"] == "broken"
               or not self.world["line_active"])
    if blocked:
      d["network_connection_status"] = "no_service"
      d["network_technology_connected"] = "none"
      d["network_signal_strength"] = "none"

  def toggle_airplane_mode(self) -> bool:
    d = self.device
    was_on = d["airplane_mode"]
    d["airplane_mode"] = not was_on
    if was_on:
      d["network_connection_status"] = "searching"
      if d["wifi_enabled"]:
        self._wifi_off_network()
    else:
      self._wifi_off_network()
      if d["vpn_connected"]:
        self.disconnect_vpn()
    self.search_network()
    return d["airplane_mode"]

  def _wifi_off_network(self) -> None:
    self.device.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")

  def toggle(self, key: str, search: bool) -> bool:
    self.device[key] = not self.device[key]
    if search:
      self.search_network()
    return self.device[key]

  def disconnect_vpn(self) -> bool:
    if not self.device["vpn_connected"]:
      return False
    self.device.update(vpn_connected=False, vpn_details=None)
    return True

  def connect_vpn(self) -> bool | None:
    if self.device["vpn_connected"]:
      return None
    self.device.update(vpn_connected=True, vpn_details=dict(DEFAULT_VPN))
    return True


class PhoneTool(DomainTool):
  parameters: ClassVar[dict[str, Any]] = obj({})

  @property
  def phone(self) -> Phone:
    return Phone(self.db)


class CheckStatusBar(PhoneTool):
  name = "check_status_bar"
  description = ("Shows what icons are currently visible in your phone's status bar (the area at"
                 " the top of the screen).")

  def apply(self, arguments: dict[str, Any]) -> str:
    return f"Status Bar: {self.phone.status_bar()}"


class CheckNetworkStatus(PhoneTool):
  name = "check_network_status"
  description = ("Checks your phone's connection status to cellular networks and Wi-Fi. Shows"
                 " airplane mode status, signal strength, network type, whether mobile data is"
                 " enabled, and whether data roaming is enabled.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    d = phone.device
    on, yes = ("OFF", "ON"), ("No", "Yes")
    lines = [f"Airplane Mode: {on[bool(d['airplane_mode'])]}",
             f"SIM Card Status: {phone.sim_status()}",
             f"Cellular Connection: {d['network_connection_status']}",
             f"Cellular Signal: {d['network_signal_strength']}",
             f"Cellular Network Type: {d['network_technology_connected']}",
             f"Mobile Data Enabled: {yes[bool(d['data_enabled'])]}",
             f"Data Roaming Enabled: {yes[bool(d['roaming_enabled'])]}",
             f"Wi-Fi Radio: {on[bool(d['wifi_enabled'])]}",
             f"Wi-Fi Connected: {yes[bool(d['wifi_connected'])]}"]
    if d["wifi_connected"]:
      lines.append(f"Connected Wi-Fi Network: {d['wifi_ssid']}")
    return "\n".join(lines)


class CheckNetworkModePreference(PhoneTool):
  name = "check_network_mode_preference"
  description = ("Checks your phone's network mode preference. Shows the type of cellular"
                 " network your phone prefers to connect to (e.g., 5G, 4G, 3G, 2G).")

  def apply(self, arguments: dict[str, Any]) -> str:
    return f"Network Mode Preference: {self.phone.device['network_mode_preference']}"


class SetNetworkModePreference(PhoneTool):
  name = "set_network_mode_preference"
  description = ("Changes the type of cellular network your phone prefers to connect to (e.g.,"
                 " 5G, 4G, 3G). Higher-speed networks (5G, 4G) provide faster data but may use"
                 " more battery.")
  parameters: ClassVar[dict[str, Any]] = obj({"mode": described(
      STRING, "The network mode to set: one of 4g_5g_preferred, 4g_only, 3g_only, 2g_only.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    phone, mode = self.phone, arguments["mode"]
    if mode not in MODES:
      return phone.with_status(f"Failed to set network mode: '{mode}' is not a valid option."
                               f" Please use one of: {', '.join(MODES)}")
    phone.device["network_mode_preference"] = mode
    phone.search_network()
    return phone.with_status(f"Preferred Network Mode set to: {mode}")


class RunSpeedTest(PhoneTool):
  name = "run_speed_test"
  description = ("Measures your current internet connection speed (download speed). Provides"
                 " information about connection quality and what activities it can support.")

  def apply(self, arguments: dict[str, Any]) -> str:
    speed, description = self.phone.speed()
    if speed is None:
      return f"Speed test failed: {description or 'Could not determine speed'}."
    return (f"Speed Test Result: {speed:.2f} Mbps ({description})."
            f" {SPEED_ADVICE.get(description, '')}")


class ToggleAirplaneMode(PhoneTool):
  name = "toggle_airplane_mode"
  description = ("Toggles Airplane Mode ON or OFF. When ON, it disconnects all wireless"
                 " communications including cellular, Wi-Fi, and Bluetooth.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    state = phone.toggle_airplane_mode()
    return phone.with_status(f"Airplane Mode is now {'ON' if state else 'OFF'}.")


class CheckSimStatus(PhoneTool):
  name = "check_sim_status"
  description = ("Checks if your SIM card is working correctly and displays its current status."
                 " Shows if the SIM is active, missing, or locked with a PIN or PUK code.")

  def apply(self, arguments: dict[str, Any]) -> str:
    status = self.phone.sim_status()
    return SIM_TEXTS.get(status, f"Unknown SIM status: {status}")


class ReseatSimCard(PhoneTool):
  name = "reseat_sim_card"
  description = ("Simulates removing and reinserting your SIM card. This can help resolve"
                 " recognition issues.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    phone.device["sim_card_missing"] = False
    phone.search_network()
    return phone.with_status("SIM card re-seated successfully.")


class ToggleData(PhoneTool):
  name = "toggle_data"
  description = ("Toggles your phone's mobile data connection ON or OFF. Controls whether your"
                 " phone can use cellular data for internet access when Wi-Fi is unavailable.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    state = phone.toggle("data_enabled", search=True)
    return phone.with_status(f"Mobile Data is now {'ON' if state else 'OFF'}.")


class ToggleRoaming(PhoneTool):
  name = "toggle_roaming"
  description = ("Toggles Data Roaming ON or OFF. When ON, roaming is enabled and your phone will"
                 " use data networks in areas outside your carrier's coverage.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    state = phone.toggle("roaming_enabled", search=True)
    return phone.with_status(f"Data Roaming is now {'ON' if state else 'OFF'}.")


class CheckDataRestrictionStatus(PhoneTool):
  name = "check_data_restriction_status"
  description = ("Checks if your phone has any data-limiting features active. Shows if Data"
                 " Saver mode is on.")

  def apply(self, arguments: dict[str, Any]) -> str:
    return ("Data Saver mode is ON (limits data usage)." if self.phone.device["data_saver_mode"]
            else "Data Saver mode is OFF.")


class ToggleDataSaverMode(PhoneTool):
  name = "toggle_data_saver_mode"
  description = ("Toggles Data Saver mode ON or OFF. When ON, it reduces data usage, which may"
                 " affect data speed.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    state = phone.toggle("data_saver_mode", search=False)
    return phone.with_status(f"Data Saver Mode is now {'ON' if state else 'OFF'}.")


class CheckApnSettings(PhoneTool):
  name = "check_apn_settings"
  description = ("Checks the technical APN settings your phone uses to connect to your carrier's"
                 " mobile data network. Shows current APN name and MMSC URL for picture"
                 " messaging.")

  def apply(self, arguments: dict[str, Any]) -> str:
    apn = self.phone.device["active_apn_settings"]
    return (f"Current APN Name: {apn['apn_name'] or 'Not Set'}\nMMSC URL (for picture messages):"
            f" {apn['mmsc_url'] or 'Not Set'}\n(These are technical settings, usually best left"
            " unchanged.)")


class SetApnSettings(PhoneTool):
  name = "set_apn_settings"
  description = ("Sets the APN settings for the phone. These technical settings are needed to"
                 " connect to the carrier's mobile data network.")
  parameters: ClassVar[dict[str, Any]] = obj({"apn_settings": {
      "type": "object", "description": "The APN settings to set.",
      "properties": {"apn_name": enum("internet", "broken"),
                     "reset_at_reboot": {"type": "boolean"},
                     "mms_apn": {"type": ["string", "null"]},
                     "mmsc_url": {"type": ["string", "null"]},
                     "mms_proxy": {"type": ["string", "null"]},
                     "mms_port": {"type": ["integer", "null"]}},
      "additionalProperties": False}})

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    phone.device["active_apn_settings"] = {**DEFAULT_APN, **arguments["apn_settings"]}
    phone.search_network()
    name = phone.device["active_apn_settings"]["apn_name"]
    return phone.with_status(f"APN settings set to: {name}")


class ResetApnSettings(PhoneTool):
  name = "reset_apn_settings"
  description = "Resets your APN settings to the default settings, at the next reboot."

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    phone.device["active_apn_settings"]["reset_at_reboot"] = True
    phone.search_network()
    return phone.with_status("APN settings will reset at reboot.")


class CheckWifiStatus(PhoneTool):
  name = "check_wifi_status"
  description = ("Checks your Wi-Fi connection status. Shows if Wi-Fi is turned on, which"
                 " network you're connected to (if any), and the signal strength.")

  def apply(self, arguments: dict[str, Any]) -> str:
    d = self.phone.device
    if not d["wifi_enabled"]:
      return "Wi-Fi is turned OFF."
    if d["wifi_connected"]:
      return (f"Wi-Fi is ON and connected to '{d['wifi_ssid']}'. Signal strength:"
              f" {d['wifi_signal_strength']}.")
    return "Wi-Fi is ON but not connected to any network."


class ToggleWifi(PhoneTool):
  name = "toggle_wifi"
  description = ("Toggles your phone's Wi-Fi radio ON or OFF. Controls whether your phone can"
                 " discover and connect to wireless networks for internet access.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    if phone.device["airplane_mode"]:
      return phone.with_status("Cannot change Wi-Fi settings while Airplane Mode is ON.")
    state = phone.toggle("wifi_enabled", search=False)
    if not state:
      phone._wifi_off_network()  # pylint: disable=protected-access
    return phone.with_status(f"Wi-Fi is now {'ON' if state else 'OFF'}.")


class CheckWifiCallingStatus(PhoneTool):
  name = "check_wifi_calling_status"
  description = "Checks if Wi-Fi Calling is enabled on your device."

  def apply(self, arguments: dict[str, Any]) -> str:
    state = "ON" if self.phone.device["wifi_calling_enabled"] else "OFF"
    return f"Wi-Fi Calling is currently turned {state}."


class ToggleWifiCalling(PhoneTool):
  name = "toggle_wifi_calling"
  description = ("Toggles Wi-Fi Calling ON or OFF. This feature allows you to make and receive"
                 " calls over a Wi-Fi network instead of using the cellular network.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    state = phone.toggle("wifi_calling_enabled", search=False)
    return phone.with_status(f"Wi-Fi Calling is now {'ON' if state else 'OFF'}.")


class CheckVpnStatus(PhoneTool):
  name = "check_vpn_status"
  description = ("Checks if you're using a VPN (Virtual Private Network) connection. Shows if a"
                 " VPN is active, connected, and displays any available connection details.")

  def apply(self, arguments: dict[str, Any]) -> str:
    d = self.phone.device
    if d["vpn_connected"]:
      details = d["vpn_details"]
      if details:  # printed as τ² prints its model's dump, the performance an enum member
        performance = details["server_performance"]
        return ("VPN is ON and connected. Details: {'server_address': "
                f"{details['server_address']!r}, 'protocol': {details['protocol']!r},"
                f" 'server_performance': <PerformanceLevel.{performance.upper()}:"
                f" {performance!r}>}}")
      return "VPN is ON and connected (no specific details available)."
    if d["vpn_enabled_setting"]:
      return "VPN is turned ON in settings, but currently not connected."
    return "VPN is turned OFF."


class ConnectVpn(PhoneTool):
  name = "connect_vpn"
  description = "Connects to your VPN (Virtual Private Network)."

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    if phone.connect_vpn() is None:
      return "VPN already connected."
    return phone.with_status("VPN connected successfully.")


class DisconnectVpn(PhoneTool):
  name = "disconnect_vpn"
  description = ("Disconnects any active VPN (Virtual Private Network) connection. Stops routing"
                 " your internet traffic through a VPN server, which might affect connection"
                 " speed or access to content.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone = self.phone
    done = phone.disconnect_vpn()
    return phone.with_status("VPN disconnected successfully." if done
                             else "No active VPN connection to disconnect.")


class CheckInstalledApps(PhoneTool):
  name = "check_installed_apps"
  description = ("Returns the name of all installed apps on the phone.")

  def apply(self, arguments: dict[str, Any]) -> str:
    names = ", ".join(self.phone.device["app_statuses"])
    return f"The following apps are installed on the phone: {names}"


APP_NAME = described(STRING, "The name of the app.")


def _granted(permissions: Mapping[str, bool]) -> list[str]:
  return [name.replace("_", " ").lower() for name, allowed in permissions.items() if allowed]


class CheckAppStatus(PhoneTool):
  name = "check_app_status"
  description = ("Checks detailed information about a specific app. Shows its permissions and"
                 " background data usage settings.")
  parameters: ClassVar[dict[str, Any]] = obj({"app_name": APP_NAME})

  def apply(self, arguments: dict[str, Any]) -> str:
    app_name = arguments["app_name"]
    app = self.phone.device["app_statuses"].get(app_name)
    if not app:
      return f"App '{app_name}' not found on this phone."
    granted = _granted(app["permissions"])
    lines = [f"Status for App: {app_name}"]
    if granted:
      lines += [" - Permissions Granted:"] + [f"   - {name}" for name in granted]
    else:
      lines.append(" - Permissions: None granted.")
    return "\n".join(lines)


class CheckAppPermissions(PhoneTool):
  name = "check_app_permissions"
  description = ("Checks what permissions a specific app currently has. Shows if the app has"
                 " access to features like storage, camera, location, etc.")
  parameters: ClassVar[dict[str, Any]] = obj({"app_name": APP_NAME})

  def apply(self, arguments: dict[str, Any]) -> str:
    app_name = arguments["app_name"]
    app = self.phone.device["app_statuses"].get(app_name)
    if not app:
      return f"App '{app_name}' not found on this phone."
    granted = _granted(app["permissions"])
    if not granted:
      return f"App '{app_name}' currently has no permissions granted."
    return f"App '{app_name}' has permission for: {', '.join(granted)}."


class GrantAppPermission(PhoneTool):
  name = "grant_app_permission"
  description = ("Gives a specific permission to an app (like access to storage, camera, or"
                 " location). Required for some app functions to work properly.")
  parameters: ClassVar[dict[str, Any]] = obj({
      "app_name": APP_NAME,
      "permission": described(STRING, "The permission to grant, such as 'storage'.")})

  def apply(self, arguments: dict[str, Any]) -> str:
    phone, app_name = self.phone, arguments["app_name"]
    permission = arguments["permission"].lower()
    app = phone.device["app_statuses"].get(app_name)
    if not app:
      ok, message = False, f"App '{app_name}' not found. Cannot grant permission."
    elif permission not in app["permissions"]:
      ok, message = False, (f"Permission '{permission}' not tracked for app '{app_name}',"
                            f" available permissions: {list(app['permissions'])}")
    else:
      app["permissions"][permission] = True
      ok, message = True, f"Permission '{permission}' granted to app '{app_name}'."
    return phone.with_status(f"{'Success. ' if ok else 'Error. '}{message}")


class CanSendMms(PhoneTool):
  name = "can_send_mms"
  description = "Checks if the messaging app can send MMS messages."

  def apply(self, arguments: dict[str, Any]) -> str:
    return ("Your messaging app can send MMS messages." if self.phone.can_send_mms()
            else "Your messaging app cannot send MMS messages.")


class RebootDevice(PhoneTool):
  name = "reboot_device"
  description = ("Restarts your phone completely. This can help resolve many temporary software"
                 " glitches by refreshing all running services and connections.")

  def apply(self, arguments: dict[str, Any]) -> str:
    phone, lines = self.phone, []
    if phone.device["active_apn_settings"]["reset_at_reboot"]:
      lines.append("Resetting APN settings...")
      phone.device["active_apn_settings"] = dict(DEFAULT_APN)
    lines.append("Restarting network services...")
    phone.device["network_connection_status"] = "searching"
    phone.search_network()
    return phone.with_status("\n".join(lines))


class CheckPaymentRequest(PhoneTool):
  name = "check_payment_request"
  description = "Checks if the agent has sent you a payment request."

  def apply(self, arguments: dict[str, Any]) -> str:
    request = self.phone.world["payment_request"]
    if request is None:
      return "No payment request has been made."
    return (f"You have a payment request for bill {request['bill_id']} of"
            f" {request['amount_due']} USD.")


class MakePayment(PhoneTool):
  name = "make_payment"
  description = "Makes a payment for the bill that the agent has sent you a payment request for."

  def apply(self, arguments: dict[str, Any]) -> str:
    request = self.phone.world["payment_request"]
    if request is None:
      return "You do not have a payment request."
    request["paid"] = True
    return f"Payment of {request['amount_due']} USD has been made for bill {request['bill_id']}."


USER_TOOLS = (CheckStatusBar, CheckNetworkStatus, CheckNetworkModePreference,
              SetNetworkModePreference, RunSpeedTest, ToggleAirplaneMode, CheckSimStatus,
              ReseatSimCard, ToggleData, ToggleRoaming, CheckDataRestrictionStatus,
              ToggleDataSaverMode, CheckApnSettings, SetApnSettings, ResetApnSettings,
              CheckWifiStatus, ToggleWifi, CheckWifiCallingStatus, ToggleWifiCalling,
              CheckVpnStatus, ConnectVpn, DisconnectVpn, CheckInstalledApps, CheckAppStatus,
              CheckAppPermissions, GrantAppPermission, CanSendMms, RebootDevice,
              CheckPaymentRequest, MakePayment)


# ------------------------------------------------ env functions: task set-up and assertions

def _set_to(key: str, wanted: bool, search: bool, text: str):
  """A `turn_x_on/off` set-up function: toggles `key` until it is `wanted`."""
  def function(db: Database, arguments: Mapping[str, Any]) -> str:
    phone = Phone(db)
    if phone.toggle(key, search) != wanted:
      phone.toggle(key, search)
    return text
  return function


def _set_airplane(wanted: bool):
  def function(db: Database, arguments: Mapping[str, Any]) -> str:
    phone = Phone(db)
    if phone.toggle_airplane_mode() != wanted:
      phone.toggle_airplane_mode()
    return f"Airplane Mode is now {'ON' if wanted else 'OFF'}."
  return function


def set_user_info(db: Database, arguments: Mapping[str, Any]) -> None:
  db.data["surroundings"].update(name=arguments["name"], phone_number=arguments["phone_number"])


def set_user_location(db: Database, arguments: Mapping[str, Any]) -> None:
  db.data["surroundings"]["is_abroad"] = arguments["abroad"]


def unseat_sim_card(db: Database, arguments: Mapping[str, Any]) -> str:
  phone = Phone(db)
  phone.device["sim_card_missing"] = True
  phone.search_network()
  return "SIM card un-seated successfully."


def lock_sim_card(db: Database, arguments: Mapping[str, Any]) -> str:
  phone, mode = Phone(db), arguments["mode"]
  if mode in ("pin", "puk"):
    phone.device["sim_card_status"] = f"locked_{mode}"
  phone.search_network()
  return f"SIM card locked successfully in {mode} mode."


def turn_data_on(db: Database, arguments: Mapping[str, Any]) -> str:
  db.data["device"]["data_enabled"] = True
  return "Data connection restored."


def break_apn_settings(db: Database, arguments: Mapping[str, Any]) -> str:
  phone = Phone(db)
  phone.device["active_apn_settings"]["apn_name"] = "broken"
  phone.search_network()
  return "APN settings broken. Please call reset_apn_settings() to fix."


def break_apn_mms_setting(db: Database, arguments: Mapping[str, Any]) -> str:
  db.data["device"]["active_apn_settings"]["mmsc_url"] = None
  return "APN MMS setting broken. Please call reset_apn_settings() to fix."


def set_wifi_calling(db: Database, arguments: Mapping[str, Any]) -> str:
  device, enabled = db.data["device"], arguments["enabled"]
  device["wifi_calling_enabled"] = enabled
  text = f"Wi-Fi Calling is now {'ON' if enabled else 'OFF'}."
  if arguments.get("mms_over_wifi") is not None:
    device["wifi_calling_mms_over_wifi"] = arguments["mms_over_wifi"]
    text += f"\nMMS over Wi-Fi is now {'ON' if arguments['mms_over_wifi'] else 'OFF'}."
  return text


def break_vpn(db: Database, arguments: Mapping[str, Any]) -> str:
  phone = Phone(db)
  phone.connect_vpn()
  phone.device["vpn_details"]["server_performance"] = "poor"
  return "VPN connection broken."


def remove_app_permission(db: Database, arguments: Mapping[str, Any]) -> tuple[bool, str]:
  app_name, permission = arguments["app_name"], arguments["permission"].lower()
  app = db.data["device"]["app_statuses"].get(app_name)
  if not app:
    return False, f"App '{app_name}' not found. Cannot remove permission."
  if permission not in app["permissions"]:
    return False, f"Permission '{permission}' not tracked for app '{app_name}'."
  app["permissions"][permission] = False
  return True, f"Permission '{permission}' removed from app '{app_name}'."


def simulate_network_search(db: Database, arguments: Mapping[str, Any]) -> None:
  Phone(db).search_network()


def _assert_device(key: str):
  def assertion(db: Database, arguments: Mapping[str, Any]) -> bool:
    return db.data["device"][key] == arguments["expected_status"]
  return assertion


def assert_mobile_data_status(db: Database, arguments: Mapping[str, Any]) -> bool:
  return Phone(db).mobile_data_working() == arguments["expected_status"]


def assert_internet_speed(db: Database, arguments: Mapping[str, Any]) -> bool:
  speed, description = Phone(db).speed()
  speed = speed or 0.0
  wanted = arguments.get("expected_desc")
  return speed >= arguments["expected_speed"] and (
      wanted is None or description.lower() == wanted.lower())


def assert_internet_not_excellent(db: Database, arguments: Mapping[str, Any]) -> bool:
  return Phone(db).speed()[1].lower() != "excellent"


def assert_can_send_mms(db: Database, arguments: Mapping[str, Any]) -> bool:
  return Phone(db).can_send_mms() == arguments["expected_status"]


def assert_mobile_data_usage_exceeded(db: Database, arguments: Mapping[str, Any]) -> bool:
  return db.data["surroundings"]["mobile_data_usage_exceeded"] == arguments["expected_status"]


USER_FUNCTIONS = {
    "set_user_info": set_user_info, "set_user_location": set_user_location,
    "turn_airplane_mode_on": _set_airplane(True), "turn_airplane_mode_off": _set_airplane(False),
    "unseat_sim_card": unseat_sim_card, "lock_sim_card": lock_sim_card,
    "turn_data_on": turn_data_on,
    "turn_data_off": _set_to("data_enabled", False, True, "Data connection broken."),
    "turn_roaming_on": _set_to("roaming_enabled", True, True, "Data Roaming is now ON."),
    "turn_roaming_off": _set_to("roaming_enabled", False, True, "Data Roaming is now OFF."),
    "turn_data_saver_mode_on": _set_to("data_saver_mode", True, False,
                                       "Data Saver Mode is now ON."),
    "turn_data_saver_mode_off": _set_to("data_saver_mode", False, False,
                                        "Data Saver Mode is now OFF."),
    "break_apn_settings": break_apn_settings, "break_apn_mms_setting": break_apn_mms_setting,
    "set_wifi_calling": set_wifi_calling, "break_vpn": break_vpn,
    "remove_app_permission": remove_app_permission,
    "simulate_network_search": simulate_network_search}
USER_ASSERTIONS = {
    "assert_airplane_mode_status": _assert_device("airplane_mode"),
    "assert_service_status": lambda db, a: (db.data["device"]["network_connection_status"]
                                            == a["expected_status"]),
    "assert_mobile_data_status": assert_mobile_data_status,
    "assert_mobile_roaming_status": _assert_device("roaming_enabled"),
    "assert_mobile_data_saver_mode_status": _assert_device("data_saver_mode"),
    "assert_internet_speed": assert_internet_speed,
    "assert_internet_not_excellent": assert_internet_not_excellent,
    "assert_can_send_mms": assert_can_send_mms,
    "assert_mobile_data_usage_exceeded": assert_mobile_data_usage_exceeded}


def sync(agent: Database, user: Database) -> None:
  """τ²'s telecom sync: the user's line state, roaming, data allowance and payment requests
  follow the carrier's db; a paid request marks its bill paid."""
  world = user.data["surroundings"]
  if world["phone_number"] is None:
    return
  carrier = Carrier(agent)
  line = carrier.line_by_phone(world["phone_number"])
  world["line_active"] = line["status"] == "Active"
  world["roaming_allowed"] = bool(line["roaming_enabled"])
  plan = carrier.plan(line["plan_id"])
  world["mobile_data_usage_exceeded"] = (line["data_used_gb"]
                                         >= plan["data_limit_gb"] + line["data_refueling_gb"])
  request = world["payment_request"]
  if request is not None and request["paid"]:
    carrier.bill(request["bill_id"])["status"] = "Paid"
    world["payment_request"] = None
  if world["payment_request"] is None:
    awaiting = carrier.bills_awaiting_payment(carrier.customer_by_phone(world["phone_number"]))
    if awaiting:
      world["payment_request"] = {"bill_id": awaiting[0]["bill_id"],
                                  "amount_due": awaiting[0]["total_due"], "paid": False}

